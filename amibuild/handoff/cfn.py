"""CloudFormation pieces every hand-off path shares: templates in short-form YAML, update policies.

A template's YAML may use CloudFormation's short-form tags (`!Sub`, `!Ref`, `!GetAtt` ...); the
loader reads each as its long form, so a YAML template gives the dict its JSON twin would.
"""

from __future__ import annotations

from typing import Any, Mapping

import yaml

from amibuild.errors import TemplateError


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


def parse_template(text: str, source: str = "template") -> dict[str, Any]:
    """A CloudFormation template in YAML (short-form tags allowed) or JSON, as a long-form dict."""
    try:
        template = yaml.load(text, Loader=_CfnLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise TemplateError(f"{source}: not a CloudFormation template: {exc}") from exc
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        raise TemplateError(f"{source}: not a CloudFormation template (no Resources mapping)")
    return template


def _resolve(expr: Any, template: Mapping[str, Any], params: Mapping[str, str]) -> Any:
    """A Ref / Fn::If / condition expression against the stack's parameters ("?" when it cannot say)."""
    if not isinstance(expr, dict) or len(expr) != 1:
        return expr
    (key, arg), = expr.items()
    if key == "Ref":
        return params.get(arg, "?")
    if key == "Condition":
        return _resolve(template.get("Conditions", {}).get(arg), template, params)
    if key == "Fn::If":
        return _resolve(arg[1] if _resolve({"Condition": arg[0]}, template, params) is True else arg[2], template, params)
    if key == "Fn::Equals":
        return str(_resolve(arg[0], template, params)) == str(_resolve(arg[1], template, params))
    if key == "Fn::Not":
        return not _resolve(arg[0], template, params)
    if key in ("Fn::And", "Fn::Or"):
        values = [_resolve(a, template, params) is True for a in arg]
        return all(values) if key == "Fn::And" else any(values)
    return "?"


def update_policy_line(template: Mapping[str, Any], logical_id: str, params: Mapping[str, str]) -> str:
    """How CloudFormation replaces the group's nodes on this update (its UpdatePolicy). Pure."""
    policy = template.get("Resources", {}).get(logical_id, {}).get("UpdatePolicy", {})
    if _resolve(policy.get("AutoScalingReplacingUpdate", {}).get("WillReplace"), template, params) in (True, "true"):
        return f"{logical_id}: replacing update (a new Auto Scaling group, then the old one is deleted)"
    roll = policy.get("AutoScalingRollingUpdate")
    if roll is None:
        return (f"{logical_id}: no rolling update policy; the group launches new nodes from the new version, "
                "running nodes are not replaced")
    def text(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    shown = ", ".join(f"{key} {text(_resolve(roll[key], template, params))}" for key in (
        "MaxBatchSize", "MinInstancesInService", "PauseTime", "WaitOnResourceSignals") if key in roll)
    return f"{logical_id}: rolling update ({shown})"
