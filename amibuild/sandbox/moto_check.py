"""The moto internals the sandbox patches or reaches into, checked before the emulator starts.

`amibuild[sandbox]` pins moto to the minor version these were written against; a newer moto that
renamed or dropped one of them would otherwise make the sandbox quietly behave differently (an
unpatched stack update answers "No updates are to be performed"). The check names what is missing.
Nothing here imports moto at module level: the parent process only asks whether moto is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

from amibuild.errors import MissingExtra
from amibuild.sandbox import SandboxError

MOTO_FALLBACK = "moto[server]>=5.2.5,<5.3"  # as pyproject.toml's `sandbox` extra says, when metadata is missing


def moto_requirement() -> str:
    """The moto requirement of the installed amibuild's `sandbox` extra."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        for line in requires("amibuild") or ():
            spec, _, marker = line.partition(";")
            if spec.strip().startswith("moto") and "sandbox" in marker:
                return spec.strip()
    except PackageNotFoundError:
        pass
    return MOTO_FALLBACK


def is_pipx(prefix: str | Path) -> bool:
    """Whether this interpreter is a pipx-managed environment (pipx writes pipx_metadata.json there)."""
    prefix = Path(prefix)
    return (prefix / "pipx_metadata.json").is_file() or "pipx" in prefix.parts and "venvs" in prefix.parts


def install_hint(prefix: str | Path | None = None, requirement: str | None = None) -> str:
    """How to add the emulator to the amibuild this user has: pipx inject/install, else pip. Pure
    but for the look at ``prefix`` (default: this interpreter's)."""
    requirement = requirement or moto_requirement()
    if is_pipx(prefix if prefix is not None else sys.prefix):
        return f"pipx inject amibuild '{requirement}' (or: pipx install --force 'amibuild[sandbox]')"
    return "pip install 'amibuild[sandbox]'"

# (module, dotted attribute): imported or replaced by amibuild/sandbox/ (server.py, patches.py, seed.py, cluster.py, touched.py).
REQUIRED: tuple[tuple[str, str], ...] = (
    ("moto.core", "DEFAULT_ACCOUNT_ID"),  # the Recycle Bin's rules belong to the default account
    ("moto", "backends"),
    ("moto.backends", "list_of_moto_modules"),  # patches.list_services_once
    ("moto.core", "responses"),
    ("moto.core.responses", "method_names_from_class"),  # patches.list_actions_once
    ("moto.ec2.models.tags", "TagBackend.describe_tags"),  # patches.read_one_resources_tags
    ("moto.ec2.utils", "EC2_PREFIX_TO_RESOURCE"),
    ("moto.ec2.utils", "get_prefix"),
    ("moto.ec2.models.amis", "AmiBackend.deregister_image"),  # image lifecycle: protection, the bin
    ("moto.ec2.models.amis", "AmiBackend.describe_images"),
    ("moto.ec2.models.amis", "AmiBackend.disable_image"),
    ("moto.ec2.models.elastic_block_store", "EBSBackend.delete_snapshot"),
    ("moto.ec2.responses.amis", "AmisResponse"),
    ("moto.cloudformation.models", "Stack.stack_parameters"),
    ("moto.cloudformation.models", "Stack.parameter_list"),
    ("moto.cloudformation.parsing", "ResourceMap.update"),
    ("moto.cloudformation.parsing", "ResourceMap.build_resource_diff"),
    ("moto.cloudformation.parsing", "clean_json"),
    ("moto.cloudformation.parsing", "get_references_from_template"),
    ("moto.cloudformation.responses", "CloudFormationResponse._validate_different_update"),
    ("moto.autoscaling.models", "FakeAutoScalingGroup._set_launch_configuration"),
    ("moto.autoscaling.models", "AutoScalingBackend.create_or_update_tags"),  # patches.py: tag_stack_groups
    ("moto.kms.models", "KmsBackend.generate_mac"),  # kms_mac.py
    ("moto.kms.models", "KmsBackend.verify_mac"),
    ("moto.kms.models", "KmsBackend.get_key_id_from_alias"),
    ("moto.kms.models", "KmsBackend.any_id_to_key_id"),  # kms_accounts.py: keys across accounts, policies, grants
    ("moto.kms.models", "KmsBackend.create_grant"),
    ("moto.kms.models", "kms_backends"),
    ("moto.kms.models", "generate_private_key"),  # kms_signing.py: the key pair made on first use
    ("moto.kms.exceptions", "AccessDeniedException"),
    ("moto.kms.exceptions", "NotFoundException"),
    ("moto.kms.responses", "KmsResponse.describe_key"),
    ("moto.kms.responses", "KmsResponse.create_grant"),
    ("moto.kms.responses", "KmsResponse.list_grants"),
    ("moto.core.exceptions", "JsonRESTError"),
    ("moto.cloudformation.parsing", "ResourceMap.create"),
    ("moto.ssm.models", "ssm_backends"),
    ("moto.ssm.models", "Parameter"),
    ("moto.ssm.models", "SimpleSystemManagerBackend.get_parameter"),
    ("moto.ssm.models", "SimpleSystemManagerBackend.send_command"),  # runcommand.py
    ("moto.ssm.responses", "SimpleSystemManagerResponse"),
    ("moto.ssm.responses", "SimpleSystemManagerResponse.describe_parameters"),  # patches.py: page_parameter_listings
    ("moto.ssm.responses", "SimpleSystemManagerResponse.put_parameter"),  # patches.py: keep_image_data_types
    ("moto.ssm.models", "SimpleSystemManagerBackend.describe_parameters"),
    ("moto.ssm.exceptions", "ValidationException"),
    ("moto.core.responses", "ActionResult"),
    ("moto.ec2.models.instances", "InstanceBackend.all_running_instances"),
    ("moto.ec2.models", "ec2_backends"),
    ("moto.ec2.models.amis", "Ami"),
    ("moto.core.parse", "default_timestamp_parser"),
    ("moto.core.utils", "utcnow"),
    ("moto.ssm.models", "utcnow"),  # clock.py: SSM's times from the emulator's clock
    ("moto.moto_api._internal.models", "moto_api_backend"),
    ("moto.core.base_backend", "BackendDict._instances"),  # amibuild/sandbox/touched.py
    ("moto.moto_server.werkzeug_app", "DomainDispatcherApplication"),
    ("moto.moto_server.werkzeug_app", "MotoRequestHandler"),
    ("moto.moto_server.werkzeug_app", "create_backend_app"),
    ("moto.eks.models", "eks_backends"),  # eks_api.py: access entries and node group updates on moto's clusters
    ("moto.eks.utils", "Session"),  # botodata.py: one boto3 Session for EKS's role ARN check
    ("moto.ec2.responses.instances", "InstanceResponse.describe_instances"),  # paging.py: pages of instances
    ("moto.ec2.models.instances", "InstanceBackend.get_reservations_by_instance_ids"),
    ("moto.ec2.exceptions", "InvalidParameterCombination"),
)

# (module, class, instance attribute): set in __init__, so looked for as `self.NAME` in the class.
REQUIRED_INSTANCE: tuple[tuple[str, str, str], ...] = (
    ("moto.cloudformation.models", "Stack", "resource_map"),
    ("moto.cloudformation.parsing", "ResourceMap", "_template"),
    ("moto.cloudformation.parsing", "ResourceMap", "input_parameters"),
    ("moto.cloudformation.parsing", "ResourceMap", "resolved_parameters"),
    ("moto.cloudformation.parsing", "ResourceMap", "no_echo_parameter_keys"),
    ("moto.cloudformation.parsing", "ResourceMap", "_resource_json_map"),
    ("moto.cloudformation.parsing", "ResourceMap", "_account_id"),
    ("moto.cloudformation.parsing", "ResourceMap", "_region_name"),
    ("moto.cloudformation.parsing", "ResourceMap", "_parsed_resources"),  # patches.py: tag_stack_groups
    ("moto.autoscaling.models", "FakeAutoScalingGroup", "instance_states"),
    ("moto.autoscaling.models", "FakeAutoScalingGroup", "autoscaling_backend"),
    ("moto.ssm.models", "SimpleSystemManagerBackend", "_parameters"),
    ("moto.ssm.models", "Command", "invocations"),  # runcommand.py
    ("moto.ssm.models", "Command", "parameters"),
    ("moto.eks.models", "Cluster", "nodegroups"),  # eks_api.py
    ("moto.eks.models", "Nodegroup", "launch_template"),
    ("moto.eks.models", "Nodegroup", "release_version"),
    ("moto.ec2.models.launch_templates", "LaunchTemplate", "versions"),
    ("moto.ec2.models.launch_templates", "LaunchTemplate", "default_version_number"),
    ("moto.ec2.models.launch_templates", "LaunchTemplateVersion", "data"),
    ("moto.kms.models", "Key", "grants"),  # kms_accounts.py
    ("moto.kms.models", "Key", "policy"),
)


def require_moto() -> None:
    """Refuse (exit 2) when moto is not installed: the sandbox is an optional extra."""
    if importlib.util.find_spec("moto") is None:
        raise MissingExtra(f"the local AWS emulator needs moto, which amibuild installs as an extra: {install_hint()}")


def check_internals(required=REQUIRED, required_instance=REQUIRED_INSTANCE) -> None:
    """Raise `SandboxError` naming the first moto attribute the sandbox needs that is missing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("moto")
    except PackageNotFoundError:
        installed = "?"
    for module_name, dotted in required:
        _resolve(module_name, dotted, installed)
    for module_name, class_name, attribute in required_instance:
        cls = _resolve(module_name, class_name, installed)
        if f"self.{attribute}" not in inspect.getsource(cls):
            _missing(f"{module_name}.{class_name}.{attribute}", installed)


def _resolve(module_name: str, dotted: str, installed: str):
    try:
        value = importlib.import_module(module_name)
    except ImportError as exc:  # the module, or something it imports from moto, moved
        raise SandboxError(f"moto {installed}: cannot import {module_name} ({exc}), which the sandbox uses; "
                           f"install the moto version amibuild was made for: {install_hint()}") from exc
    for part in dotted.split("."):
        if not hasattr(value, part):
            _missing(f"{module_name}.{dotted}", installed)
        value = getattr(value, part)
    return value


def _missing(name: str, installed: str) -> None:
    raise SandboxError(f"moto {installed} has no {name}, which the sandbox patches; install the moto version "
                       f"amibuild was made for: {install_hint()}")
