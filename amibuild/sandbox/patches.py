"""The emulator's patch to moto: CloudFormation stack updates modelled (`_model_stack_updates`)."""

from __future__ import annotations

from typing import Any



def _model_stack_updates() -> None:
    """Make moto's CloudFormation stack updates behave as AWS's where amibuild's rollout needs it.

    moto 5.2.5 keeps a stack's parameters only as resolved values: DescribeStacks shows an SSM
    parameter's value instead of its name (and no ResolvedValue), UsePreviousValue hands the
    resolved value back (a List<...> then fails with HTTP 500, an SSM name becomes an AMI id), and
    a parameter left at its Default counts as changed on every update. And an Auto Scaling group
    keeps its launch template version when the template's ``!GetAtt LatestVersionNumber`` moves.
    Here the previous value is the one passed (else the Default, unresolved), DescribeStacks shows
    it with ResolvedValue, and after an update each group follows its LaunchTemplate property.
    And as on AWS, which resolves SSM parameter values again on every update, an update whose
    template and parameters are unchanged still goes ahead when an SSM-typed parameter's value moved
    (moto answered "No updates are to be performed"). Instances are still not replaced.
    """
    from moto.cloudformation.models import Stack
    from moto.cloudformation.parsing import ResourceMap, clean_json, get_references_from_template
    from moto.cloudformation.responses import CloudFormationResponse
    from moto.ssm.models import ssm_backends

    def previous(resource_map: Any) -> dict[str, Any]:
        slots = resource_map._template.get("Parameters", {})
        values = {key: str(slot["Default"]) for key, slot in slots.items() if "Default" in slot}
        values.update(resource_map.input_parameters or {})
        return values

    def parameter_list(stack: Any) -> list[dict[str, Any]]:
        slots = stack.resource_map._template.get("Parameters", {})
        hidden = stack.resource_map.no_echo_parameter_keys
        out = []
        for key, value in previous(stack.resource_map).items():
            entry = {"ParameterKey": key, "ParameterValue": "****" if key in hidden else value}
            if slots.get(key, {}).get("Type", "").startswith("AWS::SSM::Parameter::Value<"):
                resolved = stack.resource_map.resolved_parameters.get(key)
                entry["ResolvedValue"] = ",".join(resolved) if isinstance(resolved, list) else str(resolved)
            out.append(entry)
        return out

    original_update = ResourceMap.update

    def update(resource_map: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
        resource_map.input_parameters = previous(resource_map)  # a Default left alone is no change
        original_update(resource_map, template, parameters)
        for logical_id, resource in resource_map._resource_json_map.items():
            spec = resource.get("Properties", {}).get("LaunchTemplate")
            if resource.get("Type") == "AWS::AutoScaling::AutoScalingGroup" and spec:
                resource_map[logical_id]._set_launch_configuration(None, clean_json(spec, resource_map), None)

    def moved_ssm_parameters(resource_map: Any) -> set[str]:
        """Stack parameters of SSM type whose parameter's value moved since the stack resolved it."""
        slots = resource_map._template.get("Parameters", {})
        backend = ssm_backends[resource_map._account_id][resource_map._region_name]
        moved = set()
        for key, name in previous(resource_map).items():
            if slots.get(key, {}).get("Type", "").startswith("AWS::SSM::Parameter::Value<"):
                parameter = backend.get_parameter(name)
                if parameter is not None and parameter.value != resource_map.resolved_parameters.get(key):
                    moved.add(key)
        return moved

    original_validate = CloudFormationResponse._validate_different_update

    def validate_different_update(self: Any, incoming: Any, body: str, old_stack: Any) -> None:
        if not moved_ssm_parameters(old_stack.resource_map):
            original_validate(self, incoming, body, old_stack)

    original_diff = ResourceMap.build_resource_diff

    def build_resource_diff(resource_map: Any, template: dict[str, Any], parameters: Any = None) -> dict[str, Any]:
        actions = original_diff(resource_map, template, parameters)
        moved = moved_ssm_parameters(resource_map)
        for name, resource in template.get("Resources", {}).items():
            if (name in resource_map._resource_json_map and name not in actions["Modify"]
                    and moved & set(get_references_from_template(resource))):
                actions["Modify"].append(name)
        return actions

    ResourceMap.build_resource_diff = build_resource_diff
    CloudFormationResponse._validate_different_update = validate_different_update
    Stack.stack_parameters = property(lambda stack: previous(stack.resource_map))
    Stack.parameter_list = property(parameter_list)
    ResourceMap.update = update

