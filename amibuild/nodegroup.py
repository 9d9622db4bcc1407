"""The self-managed node group template amibuild ships, and the JSON it sends to CloudFormation.

`cloudformation/nodegroup.yaml` is written by hand in CloudFormation's YAML (short-form tags such
as ``!Sub``). This module reads it into the long form (``{"Fn::Sub": ...}``), the same dict a JSON
template would give, and writes that dict as JSON: JSON is what amibuild sends (the local emulator's
YAML reader also trips over ``!Base64`` followed by a mapping).

`template_json(user_data)` swaps the launch template's bash user data for text from amibuild's user
data code (a proxy boothook, kubelet flags, ...). That text reaches ``Fn::Sub``, so only references
CloudFormation should fill in stay as they are: ``${Name}`` where Name is one of the template's
`PARAMETERS` or a pseudo parameter such as ``${AWS::StackName}``. Every other ``${`` is the
shell's (``${proxy}``, ``${!name}``) and is written ``${!`` so that CloudFormation gives it back
unchanged.

Pure functions of the file and their arguments: no AWS calls.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecError, TemplateError

TEMPLATE_PATH = Path(__file__).resolve().parent.parent / "cloudformation" / "nodegroup.yaml"

# Every parameter of the template (a test checks this against the file), for validating the
# parameters of a stack made from it before amibuild updates it.
PARAMETERS: frozenset[str] = frozenset({
    "ClusterName",
    "ClusterControlPlaneSecurityGroup",
    "NodeGroupName",
    "NodeAutoScalingGroupMinSize",
    "NodeAutoScalingGroupDesiredCapacity",
    "NodeAutoScalingGroupMaxSize",
    "NodeInstanceType",
    "NodeImageIdSSMParam",
    "NodeImageId",
    "NodeVolumeSize",
    "NodeVolumeType",
    "KeyName",
    "BootstrapArguments",
    "DisableIMDSv1",
    "RollingUpdateMaxBatchSize",
    "RollingUpdateMinInstancesInService",
    "RollingUpdatePauseTime",
    "VpcId",
    "Subnets",
})
PSEUDO_PARAMETERS: frozenset[str] = frozenset({
    "AWS::AccountId", "AWS::NotificationARNs", "AWS::NoValue", "AWS::Partition", "AWS::Region",
    "AWS::StackId", "AWS::StackName", "AWS::URLSuffix",
})
NODE_GROUP = "NodeGroup"  # the Auto Scaling group's logical id: what cfn-signal --resource names
LAUNCH_TEMPLATE = "NodeLaunchTemplate"
MAX_TEMPLATE_BODY = 51_200  # bytes CloudFormation takes as TemplateBody (more must go through S3)

# "${" and, when it closes before another "$", "{" or "}", the name it holds: in ${a:-${b}} the
# outer "${" is matched alone, so every "${" is seen once whatever the nesting.
_PLACEHOLDER = re.compile(r"\$\{(?:([^${}]*)\})?")
# How user data tells the stack it is up: cfn-signal on the node, or the API call it wraps.
_SIGNALS = ("cfn-signal", "signal-resource")


# ------------------------------------------------------------------------------------- reading

class _CfnLoader(yaml.SafeLoader):
    """SafeLoader plus CloudFormation's short-form tags, each read as its long form."""


# CloudFormation reads an unquoted 2012-10-17 as text; YAML 1.1 would make it a date (and JSON
# could not write it).
_CfnLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# Tags whose argument is kept as written (scalar, list or mapping), under "Fn::<name>" unless noted.
_SHORT_FORMS = {
    "Ref": "Ref",
    "Condition": "Condition",
    **{name: f"Fn::{name}" for name in (
        "And", "Base64", "Cidr", "Equals", "FindInMap", "GetAZs", "If", "ImportValue", "Join",
        "Length", "Not", "Or", "Select", "Split", "Sub", "ToJsonString", "Transform",
    )},
}


def _short_form(long_name: str) -> Any:
    def construct(loader: _CfnLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            return {long_name: loader.construct_scalar(node)}
        if isinstance(node, yaml.SequenceNode):
            return {long_name: loader.construct_sequence(node, deep=True)}
        return {long_name: loader.construct_mapping(node, deep=True)}

    return construct


def _get_att(loader: _CfnLoader, node: yaml.Node) -> dict[str, Any]:
    # `!GetAtt Res.Attr` is the short form of ["Res", "Attr"]; the attribute may itself hold dots
    # (Endpoint.Address), the logical id never does.
    if isinstance(node, yaml.ScalarNode):
        resource, _, attribute = loader.construct_scalar(node).partition(".")
        return {"Fn::GetAtt": [resource, attribute]}
    if isinstance(node, yaml.SequenceNode):
        return {"Fn::GetAtt": loader.construct_sequence(node, deep=True)}
    raise yaml.constructor.ConstructorError(
        None, None, "!GetAtt takes Resource.Attribute or [Resource, Attribute]", node.start_mark
    )


for _tag, _long in _SHORT_FORMS.items():
    _CfnLoader.add_constructor(f"!{_tag}", _short_form(_long))
_CfnLoader.add_constructor("!GetAtt", _get_att)


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    """The template as a long-form dict (what the same template in JSON would give)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"{path}: cannot read the node group template: {exc.strerror}") from exc
    try:
        template = yaml.load(text, Loader=_CfnLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise TemplateError(f"{path}: not a CloudFormation template: {exc}") from exc
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        raise TemplateError(f"{path}: not a CloudFormation template (no Resources mapping)")
    return template


# ------------------------------------------------------------------------------------- writing

def sub_text(text: str, names: frozenset[str] = PARAMETERS) -> str:
    """`text` for ``Fn::Sub``: ``${Name}`` for a parameter in `names` or a pseudo parameter stays a
    reference; every other ``${`` becomes ``${!``, which CloudFormation turns back into ``${``.

    A nested expansion such as ``${a:-${b}}`` becomes ``${!a:-${!b}}``: this relies on
    CloudFormation turning every ``${!`` into ``${`` (documented for one ``${!Literal}``).
    """

    def escape(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is not None and (name in names or name in PSEUDO_PARAMETERS):
            return match.group(0)
        return "${!" + match.group(0)[2:]

    return _PLACEHOLDER.sub(escape, text)


def template_json(user_data: str | None = None) -> str:
    """The template as compact JSON; with `user_data`, that text (see `sub_text`) is the nodes'.

    The user data must signal the stack (cfn-signal for `NODE_GROUP`): creation and every rolling
    update wait for each new node's signal, and without one they fail after the pause time.
    """
    template = load_template()
    if user_data is not None:
        if not user_data.strip():
            raise SpecError("the node user data is empty: the nodes would never join or signal the stack")
        if not any(word in user_data for word in _SIGNALS):
            raise SpecError(
                f"the node user data never runs cfn-signal for {NODE_GROUP}: the stack waits for every "
                "new node's signal and would roll back; write it with the stack and resource to signal"
            )
        names = frozenset(template.get("Parameters", {}))
        data = template["Resources"][LAUNCH_TEMPLATE]["Properties"]["LaunchTemplateData"]
        data["UserData"] = {"Fn::Base64": {"Fn::Sub": sub_text(user_data, names)}}
    body = json.dumps(template, separators=(",", ":"), ensure_ascii=False)
    size = len(body.encode())
    if size > MAX_TEMPLATE_BODY:
        raise SpecError(
            f"the node group template is {size} bytes with this user data; CloudFormation takes at "
            f"most {MAX_TEMPLATE_BODY} inline: shorten the user data"
        )
    return body
