"""What uses an image: one gatherer and one pure classification, for `prune` and for `fleet`.

`gather_uses` reads, per region (regions in parallel), every channel of the pipeline with its
history, and what can launch an image: launch templates (their default and latest versions, and
every version an Auto Scaling group or a managed node group names), Auto Scaling groups, launch
configurations, node group stacks (their NodeImageIdSSMParam / NodeImageId as DescribeStacks
shows them), EKS managed node groups with a launch template, and the pending, running, stopping or
stopped instances of the images asked about (filtered by image id, so the calls grow with pages,
not with instances). The answer is `Uses`, plain data that records and reads back (`to_dict`,
`from_dict`: tests/data/prune/).

`consumers` (pure) turns `Uses` into one `Consumer` per thing that runs or would launch an image,
each with the reason prune gives for keeping that image; `in_use` (pure) adds the channels and
their rollback window and groups the reasons by image. `fleet` reads the same consumers.
"""

from __future__ import annotations

import enum
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from amibuild import tags
from amibuild.aws import Aws, fan_out
from amibuild.aws.consumer_reads import InstanceImage, NodegroupTemplate, StackImage, instances_of, nodegroup_templates
from amibuild.aws.consumer_reads import ASG_NAME, auto_scaling_groups, stack_images
from amibuild.lease import is_lease
from amibuild.channels.publish import plain

DEFAULT_KEEP_VERSIONS = 3


@dataclass(frozen=True)
class ChannelFact:
    """One channel's parameter in one region: its history as (version, AMI), oldest first."""

    region: str
    name: str
    label: str  # how the reasons name it: "channel stable of ceph", or the parameter's name
    history: tuple[tuple[int, str], ...]
    times: tuple[str, ...] = ()  # when each version of `history` was written (ISO 8601; "" unknown)
    variant: str = ""  # from the parameter's name, when the pipeline's template matches it
    channel: str = ""
    k8s: str = ""


@dataclass(frozen=True)
class LaunchFacts:
    """What can launch an image in one region, as read: launch templates (id, name, default and latest
    version), the images of the versions that matter, what each Auto Scaling group names, launch
    configurations, instances (with the tags the fleet groups them by), node group stacks and
    managed node groups."""

    region: str
    templates: tuple[tuple[str, str, int, int], ...] = ()
    template_images: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    group_refs: tuple[tuple[str, str, str, str], ...] = ()  # (group, template id, template name, version)
    launch_configurations: Mapping[str, str] = field(default_factory=dict)
    instances: tuple[tuple[str, str, str], ...] = ()  # (instance id, state, image id)
    instance_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # instance id -> grouping tags
    stacks: tuple[StackImage, ...] = ()
    nodegroups: tuple[NodegroupTemplate, ...] = ()
    group_stacks: Mapping[str, str] = field(default_factory=dict)  # Auto Scaling group -> the stack that made it


@dataclass(frozen=True)
class Uses:
    """Everything gathered that may make an image "in use"; `in_use` decides (pure)."""

    channels: tuple[ChannelFact, ...] = ()
    launches: tuple[LaunchFacts, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Uses:
        """The inverse of `to_dict` (recorded facts in tests/data/prune/)."""
        channels = tuple(
            ChannelFact(c["region"], c["name"], c["label"], tuple((int(v), a) for v, a in c["history"]),
                        tuple(c.get("times", ())), c.get("variant", ""), c.get("channel", ""), c.get("k8s", ""))
            for c in data.get("channels", ()))
        launches = tuple(
            LaunchFacts(
                region=f["region"],
                templates=tuple((t[0], t[1], int(t[2]), int(t[3])) for t in f.get("templates", ())),
                template_images={tid: {int(v): image for v, image in versions.items()}
                                 for tid, versions in f.get("template_images", {}).items()},
                group_refs=tuple(tuple(r) for r in f.get("group_refs", ())),  # type: ignore[misc]
                launch_configurations=dict(f.get("launch_configurations", {})),
                instances=tuple(tuple(i) for i in f.get("instances", ())),  # type: ignore[misc]
                instance_tags={k: dict(v) for k, v in f.get("instance_tags", {}).items()},
                stacks=tuple(StackImage(**s) for s in f.get("stacks", ())),
                nodegroups=tuple(NodegroupTemplate(**n) for n in f.get("nodegroups", ())),
                group_stacks=dict(f.get("group_stacks", {})),
            )
            for f in data.get("launches", ())
        )
        return cls(channels, launches)


# ------------------------------------------------------------------------------- classification (pure)


class Kind(enum.StrEnum):
    STACK = "stack"
    NODEGROUP = "nodegroup"
    LAUNCH_TEMPLATE = "launch-template"
    AUTO_SCALING_GROUP = "auto-scaling-group"
    LAUNCH_CONFIGURATION = "launch-configuration"
    INSTANCE = "instance"


@dataclass(frozen=True)
class Consumer:
    """One thing that runs, or would launch, an image."""

    kind: Kind
    name: str  # stack, CLUSTER/NODEGROUP, launch template id, group, launch configuration, instance id
    region: str
    image_id: str
    reason: str  # how prune words the use
    follows: str = ""  # the SSM parameter a stack follows ("" when it pins an image id)
    detail: str = ""  # e.g. "default version 3", "stopped"
    tags: Mapping[str, str] = field(default_factory=dict)  # instances: the grouping tags
    template: str = ""  # the launch template id behind a launch template, group or node group consumer
    stack: str = ""  # an Auto Scaling group: the stack that made it (and rolls it), when it says so


def consumers(uses: Uses) -> tuple[Consumer, ...]:
    """Every consumer in the gathered facts, region by region. Pure."""
    found: list[Consumer] = []
    for facts in uses.launches:
        region = facts.region
        templates = {tid: (name, default, latest) for tid, name, default, latest in facts.templates}
        by_name = {name: tid for tid, (name, _, _) in templates.items()}
        wanted: dict[str, dict[str, list[tuple[Kind, str, str]]]] = {
            tid: {"$Default": [(Kind.LAUNCH_TEMPLATE, tid, "default version")],
                  "$Latest": [(Kind.LAUNCH_TEMPLATE, tid, "latest version")]} for tid in templates}
        # a mixed instances policy's overrides may name one template many times (one per instance type)
        for group, tid, version in dict.fromkeys((g, t or by_name.get(n, ""), v) for g, t, n, v in facts.group_refs):
            if tid in wanted:
                wanted[tid].setdefault(version, []).append(
                    (Kind.AUTO_SCALING_GROUP, group, f"used by Auto Scaling group {group}"))
        for tid, versions in wanted.items():
            name, default, latest = templates[tid]
            numbers = {"$Default": default, "$Latest": latest}
            images = facts.template_images.get(tid, {})
            for version, whys in versions.items():
                number = numbers.get(version) or (int(version) if version.isdigit() else 0)
                if number not in images:
                    continue
                for kind, who, why in whys:
                    group = kind is Kind.AUTO_SCALING_GROUP
                    found.append(Consumer(kind, who if group else f"{tid} ({name})",
                                          region, images[number],
                                          f"launch template {tid} ({name}) v{number} {why} in {region}",
                                          detail=f"{name} v{number}" if group else f"{why} {number}", template=tid,
                                          stack=facts.group_stacks.get(who, "") if group else ""))
        for name, image_id in facts.launch_configurations.items():
            found.append(Consumer(Kind.LAUNCH_CONFIGURATION, name, region, image_id,
                                  f"launch configuration {name} in {region}"))
        for instance_id, state, image_id in facts.instances:
            tags = facts.instance_tags.get(instance_id, {})
            found.append(Consumer(Kind.INSTANCE, instance_id, region, image_id, f"instance {instance_id} {state}",
                                  detail=state, tags=tags, stack=facts.group_stacks.get(tags.get(ASG_NAME, ""), "")))
        for stack in facts.stacks:
            if image := stack.image_id or stack.resolved:
                found.append(Consumer(Kind.STACK, stack.name, region, image, f"stack {stack.name} in {region}",
                                      follows="" if stack.image_id else stack.ssm_parameter, detail=stack.status))
        for group in facts.nodegroups:
            tid = group.template_id
            name, default, latest = templates.get(tid, ("", 0, 0))
            number = {"$Default": default, "$Latest": latest}.get(group.version) or (
                int(group.version) if group.version.isdigit() else 0)
            if image := facts.template_images.get(tid, {}).get(number):
                who = f"{group.cluster}/{group.name}"
                found.append(Consumer(Kind.NODEGROUP, who, region, image,
                                      f"managed node group {who} (launch template {tid} v{number}) in {region}",
                                      detail=f"{name} v{number}", template=tid))
    return tuple(found)


def in_use(uses: Uses, keep_versions: int = DEFAULT_KEEP_VERSIONS) -> dict[str, tuple[str, ...]]:
    """Image id -> every reason it is in use. Pure: the facts `gather_uses` read in, the decision out.

    In use: the current value of every channel amibuild wrote (any region, any name template), the
    last `keep_versions` earlier values of each channel holding another AMI (so rollback keeps
    working), and every consumer (`consumers`): the default and latest version of every launch
    template and every version an Auto Scaling group or managed node group names, every launch
    configuration's image, every instance's image, every stack's.
    """
    found: dict[str, list[str]] = defaultdict(list)
    for channel in uses.channels:
        if not channel.history:
            continue
        current = channel.history[-1][1]
        found[current].append(f"{channel.label} current in {channel.region}")
        window: list[str] = []
        for version, value in reversed(channel.history):
            if len(window) >= keep_versions:
                break
            if value != current and value not in window:
                window.append(value)
                found[value].append(f"{channel.label} version {version} in {channel.region} (rollback window)")
    for consumer in consumers(uses):
        found[consumer.image_id].append(consumer.reason)
    return {image: tuple(dict.fromkeys(reasons)) for image, reasons in found.items()}


# ------------------------------------------------------------------------------- gather (read-only)


def channel_facts(aws: Aws, region: str, pipeline: str, path: str, pattern: re.Pattern[str]) -> list[ChannelFact]:
    """Every channel of the pipeline in `region`: those tagged with it (whatever template named them:
    a changed ``parameter_template``, a second pipeline file) and those under today's template's path
    (written before channels were tagged)."""
    tagged = aws.parameters_tagged(region, {tags.PIPELINE: [pipeline]})
    listed = [p.name for p in aws.parameters_under(path, region)]
    names = [name for name in dict.fromkeys([*listed, *tagged]) if not is_lease(name)]
    histories = fan_out(names, lambda name: aws.parameter_history(name, region))
    facts = []
    for name in names:
        match = pattern.match(name)
        label = (f"channel {match.group('channel')} of {match.group('variant')}" if match
                 else f"channel parameter {name}" if name in tagged else f"parameter {name}")
        versions = histories[name]
        fields = match.groupdict() if match else {}
        facts.append(ChannelFact(region, name, label, tuple((p.version, p.value) for p in versions),
                                 tuple(p.last_modified.isoformat() if p.last_modified else "" for p in versions),
                                 fields.get("variant", ""), fields.get("channel", ""), fields.get("k8s", "") or ""))
    return facts


def launch_facts(aws: Aws, region: str, image_ids: Sequence[str], channel_images: Any = None) -> LaunchFacts:
    """What can launch an image in `region`; instances only of `image_ids` (filtered by AWS).

    The independent reads run at once, then the template versions they name (one call per template,
    in parallel), then the instances. `channel_images`, when given, is a callable run beside the
    first reads whose image ids join `image_ids` (the channels' histories, read meanwhile).
    """
    reads: dict[str, Any] = {
        "templates": lambda: tuple(aws.launch_templates(region)),
        "auto_scaling": lambda: auto_scaling_groups(aws, region),
        "groups": lambda: tuple(nodegroup_templates(aws, region)),
        "stacks": lambda: tuple(stack_images(aws, region)),
        "configurations": lambda: aws.launch_configuration_images(region),
        "channels": channel_images or (lambda: ()),
    }
    got = fan_out(list(reads), lambda name: reads[name]())
    templates, groups, stacks = got["templates"], got["groups"], got["stacks"]
    refs, group_stacks = got["auto_scaling"].refs, got["auto_scaling"].stacks
    by_name = {name: tid for tid, name, _, _ in templates}
    wanted: dict[str, set[str]] = {tid: {"$Default", "$Latest"} for tid, _, _, _ in templates}
    for tid, name, version in [(r[1], r[2], r[3]) for r in refs] + [(g.template_id, "", g.version) for g in groups]:
        tid = tid or by_name.get(name, "")
        if tid in wanted:
            wanted[tid].add(version)
    images = fan_out(list(wanted), lambda tid: aws.launch_template_image_ids(region, tid, sorted(wanted[tid])))
    known = {*image_ids, *got["channels"], *(i for versions in images.values() for i in versions.values()),
             *(s.image_id or s.resolved for s in stacks)}
    instances: list[InstanceImage] = instances_of(aws, region, sorted(known)) if known else []
    return LaunchFacts(region, templates, images, refs, got["configurations"],
                       tuple((i.instance_id, i.state, i.image_id) for i in instances),
                       {i.instance_id: dict(i.tags) for i in instances if i.tags}, stacks, groups,
                       dict(group_stacks))


def gather_uses(aws: Aws, pipeline: str, regions: Sequence[str], path: str, pattern: re.Pattern[str],
                image_ids: Mapping[str, Sequence[str]]) -> Uses:
    """Read every channel and every consumer, the regions in parallel. Instances are read of the
    images in `image_ids` (region -> ids) and of every image a channel or a launcher names."""

    def read(region: str) -> tuple[list[ChannelFact], LaunchFacts]:
        channels: list[ChannelFact] = []

        def channel_images() -> set[str]:
            channels.extend(channel_facts(aws, region, pipeline, path, pattern))
            return {value for c in channels for _, value in c.history}

        launches = launch_facts(aws, region, image_ids.get(region, ()), channel_images)
        return channels, launches

    found = fan_out(list(dict.fromkeys(regions)), read)
    return Uses(tuple(c for region in found for c in found[region][0]), tuple(found[region][1] for region in found))
