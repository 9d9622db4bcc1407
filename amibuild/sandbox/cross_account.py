"""The emulator's consumer accounts: images shared across accounts, Allowed AMIs, block public access.

moto keeps images per account and picks the account from the request's access key (an STS
AssumeRole of ``arn:aws:iam::ACCOUNT:role/...`` gives keys of that account). Here:

- DescribeImages from account B also shows another account's image in the region when its launch
  permissions name B (``UserId``) or ``all``; RunInstances of another account's image that is not
  shared with B is ``AuthFailure`` ("Not authorized for images").
- Get/Enable/DisableAllowedImagesSettings and ReplaceImageCriteriaInAllowedImagesSettings, per
  account and region (state ``disabled`` until enabled). With ``enabled``, DescribeImages leaves out
  images of other accounts that no criterion admits; with ``enabled`` or ``audit-mode`` it shows
  ``ImageAllowed``. Own images are always allowed, as on AWS.
- Get/Enable/DisableImageBlockPublicAccess (``unblocked`` until enabled), per account and region.
The state lives on moto's EC2 backend of the account and region, so every reset drops it.
"""

from __future__ import annotations

import re
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from amibuild.values import parse_iso_time, wildcard_match

MAX_CRITERIA = 10
MAX_PROVIDERS = 200
MAX_NAMES = 50
_ACCOUNT = re.compile(r"[0-9]{12}")
_PROVIDER_WORDS = ("amazon", "aws-marketplace", "aws-backup-vault", "none")
_NAME = re.compile(r"[A-Za-z0-9()\[\]./\-'@_*? ]{1,128}")
_AMAZON_OWNERS = ("137112412989", "602401143452", "amazon")  # owners the seed's Amazon images carry
_local = threading.local()  # the verdicts of the DescribeImages being answered, for `image_allowed`


def settings_of(backend: Any) -> dict[str, Any]:
    """The Allowed AMIs settings of one account and region (moto's EC2 backend)."""
    if not hasattr(backend, "_amibuild_allowed"):
        backend._amibuild_allowed = {"state": "disabled", "criteria": []}
    return backend._amibuild_allowed


def _criterion_admits(criterion: dict[str, Any], ami: Any, now: datetime) -> bool:
    """One criterion: every condition it sets must hold (a list holds when any value matches)."""
    providers = criterion.get("ImageProviders") or []
    if providers:
        owner = str(ami.owner_id)
        alias = getattr(ami, "owner_alias", "") or ""
        if not any(p == owner or (p == "amazon" and (alias == "amazon" or owner in _AMAZON_OWNERS)) for p in providers):
            return False
    names = criterion.get("ImageNames") or []
    if names and not any(wildcard_match(ami.name or "", pattern) for pattern in names):
        return False
    created = (criterion.get("CreationDateCondition") or {}).get("MaximumDaysSinceCreated")
    if created is not None:
        when = parse_iso_time(str(getattr(ami, "creation_date", "")))
        if when is None or now - when > timedelta(days=int(created)):
            return False
    deprecated = (criterion.get("DeprecationTimeCondition") or {}).get("MaximumDaysSinceDeprecated")
    if deprecated is not None:
        when = parse_iso_time(str(getattr(ami, "deprecation_time", None) or ""))
        if when is not None and now - when > timedelta(days=int(deprecated)):
            return False
    return True


def admits(backend: Any, ami: Any, now: datetime | None = None) -> bool:
    """Whether the account's criteria admit ``ami`` (its own images always)."""
    if str(ami.owner_id) == str(backend.account_id):
        return True
    now = now or datetime.now(timezone.utc)
    return any(_criterion_admits(c, ami, now) for c in settings_of(backend)["criteria"])


def shared_with(ami: Any, account: str) -> bool:
    return any(p.get("UserId") == account or p.get("Group") == "all" for p in ami.launch_permissions)


def _peers(backend: Any) -> list[Any]:
    """The EC2 backends of the other accounts in the backend's region that exist already."""
    from moto.ec2.models import ec2_backends

    out = []
    for account, regions in list(ec2_backends.items()):
        if account != backend.account_id and backend.region_name in dict.keys(regions):
            out.append(dict.__getitem__(regions, backend.region_name))
    return out


def shared_images(backend: Any, ami_ids: list[str], owners: list[str], filters: Any) -> list[Any]:
    """Other accounts' images in the region shared with the backend's account, as DescribeImages selects."""
    from moto.ec2.utils import generic_filter

    account = backend.account_id
    found = []
    for peer in _peers(backend):
        for ami in list(peer.amis.values()):
            if ami.id in backend.amis or ami.state == "disabled" or not shared_with(ami, account):
                continue
            if ami_ids and ami.id not in ami_ids:
                continue
            if owners and not ({o for o in owners if o != "self"} & {str(ami.owner_id), ami.owner_alias or ""}):
                continue
            found.append(ami)
    return generic_filter(filters, found) if filters else found


def owner_of(image_id: str, region: str) -> Any:
    """(backend, ami) of the account that holds ``image_id`` in ``region``, or (None, None)."""
    from moto.ec2.models import ec2_backends

    for _, regions in list(ec2_backends.items()):
        if region in dict.keys(regions):
            backend = dict.__getitem__(regions, region)
            if image_id in backend.amis:
                return backend, backend.amis[image_id]
    return None, None


def install() -> None:
    """Patch moto's EC2 responses (once, in the emulator's process; after `image_states.install`)."""
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError, InvalidAMIIdError
    from moto.ec2.models.amis import Ami
    from moto.ec2.models.instances import InstanceBackend
    from moto.ec2.responses.amis import AmisResponse

    class Viewed(ActionResult):
        """DescribeImages' answer, serialized with the viewing account's ImageAllowed verdicts."""

        def __init__(self, result: object, verdicts: dict[str, bool] | None) -> None:
            super().__init__(result)
            self.verdicts = verdicts

        def execute_result(self, context: Any) -> Any:
            _local.verdicts = self.verdicts
            try:
                return super().execute_result(context)
            finally:
                _local.verdicts = None

    Ami.image_allowed = property(lambda ami: (getattr(_local, "verdicts", None) or {}).get(ami.id))
    previous_describe = AmisResponse.describe_images

    def describe(response: Any) -> ActionResult:
        backend = response.ec2_backend
        ami_ids = response._get_param("ImageIds", [])
        missing = None
        try:
            own = list(previous_describe(response).result["Images"])
        except InvalidAMIIdError as exc:
            own, missing = [], exc
        exec_users = response._get_param("ExecutableUsers", [])
        shared = shared_images(backend, ami_ids, response._get_param("Owners", []),
                               response._filters_from_querystring())
        if exec_users and not ({"self", backend.account_id} & set(exec_users)):
            shared = [a for a in shared if any(p.get("UserId") in exec_users for p in a.launch_permissions)]
        images = own + shared
        state = settings_of(backend)["state"]
        verdicts = None
        if state in ("enabled", "audit-mode"):
            verdicts = {ami.id: admits(backend, ami) for ami in images}
            if state == "enabled":
                images = [ami for ami in images if verdicts[ami.id]]
        if missing is not None and not shared:
            raise missing
        return Viewed({"Images": images}, verdicts)

    def get_allowed(response: Any) -> ActionResult:
        response.error_on_dryrun()
        held = settings_of(response.ec2_backend)
        return ActionResult({"State": held["state"], "ImageCriteria": held["criteria"], "ManagedBy": "account"})

    def state_param(response: Any, name: str, valid: tuple[str, ...]) -> str:
        state = response._get_param(name)
        if state not in valid:
            raise EC2ClientError("InvalidParameterValue",
                                 f"Value ({state}) for parameter {name} is invalid. "
                                 f"Valid values: {', '.join(valid)}.")
        response.error_on_dryrun()
        return state

    def enable_allowed(response: Any) -> ActionResult:
        state = state_param(response, "AllowedImagesSettingsState", ("enabled", "audit-mode"))
        settings_of(response.ec2_backend)["state"] = state
        return ActionResult({"AllowedImagesSettingsState": state})

    def disable_allowed(response: Any) -> ActionResult:
        response.error_on_dryrun()
        settings_of(response.ec2_backend)["state"] = "disabled"
        return ActionResult({"AllowedImagesSettingsState": "disabled"})

    def replace_criteria(response: Any) -> ActionResult:
        criteria = _checked(response._get_param("ImageCriteria", []) or [], EC2ClientError)
        response.error_on_dryrun()
        settings_of(response.ec2_backend)["criteria"] = criteria
        return ActionResult({"ReturnValue": True})

    def public_access(backend: Any) -> dict[str, str]:
        if not hasattr(backend, "_amibuild_block_public"):
            backend._amibuild_block_public = {"state": "unblocked"}
        return backend._amibuild_block_public

    def get_block(response: Any) -> ActionResult:
        response.error_on_dryrun()
        return ActionResult({"ImageBlockPublicAccessState": public_access(response.ec2_backend)["state"],
                             "ManagedBy": "account"})

    def enable_block(response: Any) -> ActionResult:
        state = state_param(response, "ImageBlockPublicAccessState", ("block-new-sharing",))
        public_access(response.ec2_backend)["state"] = state
        return ActionResult({"ImageBlockPublicAccessState": state})

    def disable_block(response: Any) -> ActionResult:
        response.error_on_dryrun()
        public_access(response.ec2_backend)["state"] = "unblocked"
        return ActionResult({"ImageBlockPublicAccessState": "unblocked"})

    previous_run = InstanceBackend.run_instances

    def run_instances(backend: Any, image_id: str, *args: Any, **kwargs: Any) -> Any:
        if image_id and image_id not in backend.amis:
            holder, ami = owner_of(image_id, backend.region_name)
            if holder is not None and not shared_with(ami, backend.account_id):
                raise EC2ClientError("AuthFailure", f"Not authorized for images: [{image_id}]")
        return previous_run(backend, image_id, *args, **kwargs)

    AmisResponse.describe_images = describe
    AmisResponse.get_allowed_images_settings = get_allowed
    AmisResponse.enable_allowed_images_settings = enable_allowed
    AmisResponse.disable_allowed_images_settings = disable_allowed
    AmisResponse.replace_image_criteria_in_allowed_images_settings = replace_criteria
    AmisResponse.get_image_block_public_access_state = get_block
    AmisResponse.enable_image_block_public_access = enable_block
    AmisResponse.disable_image_block_public_access = disable_block
    InstanceBackend.run_instances = run_instances


def _checked(raw: list[Any], error: Any) -> list[dict[str, Any]]:
    """ReplaceImageCriteriaInAllowedImagesSettings' criteria, within AWS's limits (InvalidParameterValue)."""
    def refuse(text: str) -> Exception:
        return error("InvalidParameterValue", text)

    if len(raw) > MAX_CRITERIA:
        raise refuse(f"The number of image criteria ({len(raw)}) exceeds the limit of {MAX_CRITERIA}.")
    out = []
    for criterion in raw:
        providers = [str(p) for p in criterion.get("ImageProviders") or []]
        names = [str(n) for n in criterion.get("ImageNames") or []]
        if len(providers) > MAX_PROVIDERS:
            raise refuse(f"An image criterion can have at most {MAX_PROVIDERS} image providers.")
        if len(names) > MAX_NAMES:
            raise refuse(f"An image criterion can have at most {MAX_NAMES} image names.")
        for provider in providers:
            if provider not in _PROVIDER_WORDS and not _ACCOUNT.fullmatch(provider):
                raise refuse(f"Value ({provider}) for parameter ImageProvider is invalid. Valid values: amazon, "
                             "aws-marketplace, aws-backup-vault, none, or a 12-digit account ID.")
        if "none" in providers and len(providers) > 1:
            raise refuse("When ImageProvider none is specified, no other image providers can be specified.")
        for name in names:
            if not _NAME.fullmatch(name) or ("?" in name and len(name) < 3):
                raise refuse(f"Value ({name}) for parameter ImageName is invalid.")
        kept: dict[str, Any] = {}
        if providers:
            kept["ImageProviders"] = providers
        if names:
            kept["ImageNames"] = names
        for key, field in (("CreationDateCondition", "MaximumDaysSinceCreated"),
                           ("DeprecationTimeCondition", "MaximumDaysSinceDeprecated")):
            value = (criterion.get(key) or {}).get(field)
            if value is not None:
                kept[key] = {field: int(value)}
        out.append(kept)
    return out
