"""The emulator's patches to moto: CloudFormation stack updates modelled (`model_stack_updates`), and
a stack's Auto Scaling groups tagged with their stack (`tag_stack_groups`), and DescribeParameters
paged as AWS pages it (`page_parameter_listings`); and lookups moto redoes on every request made
once (`list_services_once`, `list_actions_once`)."""

from __future__ import annotations

import functools
from typing import Any



def model_stack_updates() -> None:
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


# the tags CloudFormation puts on every resource of a stack that takes tags
STACK_NAME_TAG = "aws:cloudformation:stack-name"
STACK_ID_TAG = "aws:cloudformation:stack-id"
LOGICAL_ID_TAG = "aws:cloudformation:logical-id"


def tag_stack_groups() -> None:
    """Tag each Auto Scaling group a stack makes with its stack, as CloudFormation does.

    AWS tags every resource of a stack that takes tags with ``aws:cloudformation:stack-name``,
    ``aws:cloudformation:stack-id`` and ``aws:cloudformation:logical-id``, and an Auto Scaling group
    propagates them to the instances it launches. moto 5.2.5 tags only EC2 resources so: a group a
    stack made names no stack, and `amibuild fleet` could not say which stack rolls it. Here, after
    a stack's create or update, each of its groups carries the three tags (PropagateAtLaunch, as on
    AWS), and so do the instances it already runs (moto launches them while it creates the group).
    """
    from moto.autoscaling.models import FakeAutoScalingGroup
    from moto.cloudformation.parsing import ResourceMap
    from moto.ec2.models import ec2_backends

    def tag_groups(resource_map: Any) -> None:
        stack = {STACK_NAME_TAG: resource_map["AWS::StackName"], STACK_ID_TAG: resource_map["AWS::StackId"]}
        for logical_id in list(resource_map._resource_json_map):
            group = resource_map._parsed_resources.get(logical_id)
            if not isinstance(group, FakeAutoScalingGroup):
                continue
            values = {**stack, LOGICAL_ID_TAG: logical_id}
            group.autoscaling_backend.create_or_update_tags(
                [{"ResourceId": group.name, "ResourceType": "auto-scaling-group", "Key": key, "Value": value,
                  "PropagateAtLaunch": True} for key, value in values.items()])
            running = [state.instance.id for state in group.instance_states]
            if running:
                ec2_backends[resource_map._account_id][resource_map._region_name].create_tags(running, values)

    original_create = ResourceMap.create

    def create(resource_map: Any, template: dict[str, Any]) -> bool:
        ready = original_create(resource_map, template)
        tag_groups(resource_map)
        return ready

    original_update = ResourceMap.update  # `model_stack_updates`'s, when it ran first

    def update(resource_map: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
        original_update(resource_map, template, parameters)
        tag_groups(resource_map)  # a group the update added

    ResourceMap.create = create
    ResourceMap.update = update


PARAMETER_PAGE_MAX = 50  # DescribeParameters' MaxResults: 1 to 50, 10 when not given (the SSM API reference)


def page_parameter_listings() -> None:
    """Answer DescribeParameters in pages of ``MaxResults``, as AWS does.

    moto 5.2.5 answers 10 parameters a page whatever MaxResults asks for, so a listing that asks
    for AWS's largest page (50) took five times the requests it takes on AWS, each going over every
    parameter of the region again. Here the page is MaxResults (10 when not given); a value outside
    1 to 50 is refused with AWS's ValidationException, and NextToken works as before.
    """
    from moto.ssm.exceptions import ValidationException
    from moto.ssm.responses import SimpleSystemManagerResponse

    def describe_parameters(self: Any) -> Any:
        from moto.core.responses import ActionResult

        page_size = self._get_param("MaxResults")
        page_size = 10 if page_size is None else int(page_size)
        if not 1 <= page_size <= PARAMETER_PAGE_MAX:
            raise ValidationException(
                f"1 validation error detected: Value '{page_size}' at 'maxResults' failed to satisfy "
                f"constraint: Member must have value less than or equal to {PARAMETER_PAGE_MAX}")
        token = self._get_param("NextToken")
        start = int(token.strip() if hasattr(token, "strip") and token.strip() else 0)
        found = self.ssm_backend.describe_parameters(self._get_param("Filters"), self._get_param("ParameterFilters"))
        page = found[start:start + page_size]
        response: dict[str, Any] = {"Parameters": [parameter.describe_response_object(False) for parameter in page]}
        if start + page_size < len(found):
            response["NextToken"] = str(start + page_size)
        return ActionResult(response)

    SimpleSystemManagerResponse.describe_parameters = describe_parameters


def keep_image_data_types() -> None:
    """Refuse an overwrite that changes a parameter's data type to or from ``aws:ec2:image``.

    SSM's user guide (Parameter data types): "You can't change a parameter to or from either of these
    data types" (``aws:ec2:image``, ``aws:ssm:integration``). moto 5.2.5 takes the new data type, so a
    channel written as ``text`` by someone else was turned into an image parameter here and nowhere
    else. Refused with ValidationException; an overwrite that gives no DataType stays moto's.
    """
    from moto.ssm.exceptions import ValidationException
    from moto.ssm.responses import SimpleSystemManagerResponse

    put = SimpleSystemManagerResponse.put_parameter

    def put_parameter(self: Any) -> Any:
        name, wanted = self._get_param("Name"), self._get_param("DataType")
        versions = self.ssm_backend._parameters.get(name) if wanted and self._get_param("Overwrite") else None
        held = versions[-1].data_type if versions else wanted
        if held != wanted and "aws:ec2:image" in (held, wanted):
            raise ValidationException(f"Parameter {name} has data type {held}: a parameter's data type can't be "
                                      f"changed to or from aws:ec2:image (to {wanted})")
        return put(self)

    SimpleSystemManagerResponse.put_parameter = put_parameter


def read_one_resources_tags() -> None:
    """An EC2 resource's own tags read from its entry, not from a scan of every tag in the region.

    moto's `TaggedEC2Resource.get_tags` asks `describe_tags(resource-id=ID)`, which walks every
    tag of every resource: a DescribeImages of N tagged images costs N² (667 images: 6 s of the
    9 s answer). A plain id (no `*` or `?`, which AWS's tag filters treat as wildcards) gets the
    same rows, in the same order, from `tags[ID]`; anything else goes to moto as before.
    """
    from moto.ec2.models.tags import TagBackend
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    scan = TagBackend.describe_tags

    def describe_tags(self: Any, filters: dict[str, list[str]] | None = None) -> list[dict[str, str]]:
        ids = (filters or {}).get("resource-id")
        if filters is None or set(filters) != {"resource-id"} or len(ids) != 1 or any(c in ids[0] for c in "*?[\\"):
            return scan(self, filters)
        resource_id = ids[0]
        kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
        return [{"resource_id": resource_id, "key": key, "value": value, "resource_type": kind}
                for key, value in dict(self.tags.get(resource_id, {})).items()]

    TagBackend.describe_tags = describe_tags


def list_services_once() -> None:
    """moto's service folders listed once, not on every request.

    moto's dispatcher asks `backends.list_of_moto_modules()` for each request's host, and that lists
    moto's package folder and stats each of its entries (174 in moto 5.2) every time: about 7 % of
    the emulator's CPU in a build. The folder does not change while the emulator runs.
    """
    from moto import backends

    services = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: services


def list_actions_once() -> None:
    """Each moto response class's method names listed once per class, not on every request.

    moto's `BaseResponse.call_action` asks `method_names_from_class` (an `inspect.getmembers` of the
    class) whether the action exists, on every request: about a tenth of the emulator's CPU for a
    simple call. The sandbox's patches add their methods before it serves, and nothing changes a
    response class after.
    """
    from moto.core import responses

    responses.method_names_from_class = functools.cache(responses.method_names_from_class)
