"""What a failed or interrupted build left in AWS, and removing it.

Packer cleans up after itself when it is cancelled cleanly, but not always: a cancel while it
copies the image to other regions leaves the copies (untagged: Packer tags at the very end) and
their snapshots; a Packer killed outright, or cut off from its endpoint, leaves its instance, key
pair and security group. amibuild therefore makes a run's resources findable on its own.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from amibuild import tags
from amibuild.aws import Aws
from amibuild.errors import AwsError, EndpointUnreachable
from amibuild.bake.packer import parse_line
from amibuild.poll import until

PACKER_GROUP_PREFIX = "packer_"  # Packer 1.6 names its temporary security groups packer_<uuid>
KINDS = ("instance", "image", "snapshot", "volume", "key-pair", "security-group")

_INSTANCE = re.compile(r"\bInstance ID: (i-[0-9a-f]+)", re.ASCII)
_KEY_PAIR = re.compile(r"Creating temporary keypair: (\S+)")
_GROUP = re.compile(r"Creating temporary security group for this instance: (\S+)")
_AMI = re.compile(r"^\s*[A-Za-z0-9_.-]+: AMI: (ami-[0-9a-f]+)", re.ASCII)
_TARGET = re.compile(r"^(?:==> |\s*)([A-Za-z0-9_.-]+): ", re.ASCII)


@dataclass(frozen=True)
class Leftover:
    """One AWS resource a run left behind."""

    kind: str  # one of KINDS
    region: str
    id: str

    def command(self) -> str:
        """The AWS CLI command that removes it."""
        verb = {
            "instance": f"terminate-instances --instance-ids {self.id}",
            "image": f"deregister-image --image-id {self.id}",
            "snapshot": f"delete-snapshot --snapshot-id {self.id}",
            "volume": f"delete-volume --volume-id {self.id}",
            "key-pair": f"delete-key-pair --key-name {self.id}",
            # a group known only by the name Packer gave it (the endpoint was gone when it was looked up)
            "security-group": (f"delete-security-group --group-id {self.id}" if self.id.startswith("sg-")
                               else f"delete-security-group --group-name {self.id}"),
        }[self.kind]
        return f"aws ec2 {verb} --region {self.region}"

    def __str__(self) -> str:
        return f"{self.kind} {self.id} in {self.region}"


@dataclass
class StreamResources:
    """Resources Packer announced on its machine-readable stream, by build (source) name."""

    instances: dict[str, list[str]] = field(default_factory=dict)
    key_pairs: dict[str, list[str]] = field(default_factory=dict)
    security_groups: dict[str, list[str]] = field(default_factory=dict)
    amis: dict[str, list[str]] = field(default_factory=dict)


def stream_resources(lines: Iterable[str]) -> StreamResources:
    """The instance ids, key pair and security group names and AMI ids in a Packer stream."""
    found = StreamResources()
    for raw in lines:
        line = parse_line(raw)
        if line is None or line.type != "ui" or len(line.data) < 2:
            continue
        text = line.data[1]
        target = _TARGET.match(text)
        build = target.group(1) if target else ""
        for pattern, bucket in ((_INSTANCE, found.instances), (_KEY_PAIR, found.key_pairs),
                                (_GROUP, found.security_groups), (_AMI, found.amis)):
            match = pattern.search(text)
            if match and match.group(1) not in bucket.get(build, []):
                bucket.setdefault(build, []).append(match.group(1))
    return found


def key_pair_name(run_id: str, variant: str, region: str) -> str:
    """The temporary key pair name rendered into the template (letters, digits, '-', '_' only)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"amibuild-{run_id}-{variant}-{region}")


RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}\Z")  # as amibuild.bake.build_plan.new_run_id makes them


@dataclass(frozen=True)
class Scope:
    """Where one variant of one run (``variant`` None: every variant of it) may have left things."""

    run_id: str
    variant: str | None
    ami_name_prefix: str | None  # None: any name ending in the run id
    build_regions: tuple[str, ...]
    regions: tuple[str, ...]  # every target region (build regions and copies)

    def __post_init__(self) -> None:
        if not RUN_ID.match(self.run_id):  # a pattern here would match other runs' resources
            raise ValueError(f"not an amibuild run id: {self.run_id!r}")

    def region_of(self, build: str) -> str:
        """The region of a Packer build name (our sources are named after their region)."""
        name = build.rsplit(".", 1)[-1]
        return name if name in self.build_regions else self.build_regions[0]


def find(aws: Aws, scope: Scope, seen: StreamResources) -> list[Leftover]:
    """Everything of this run and variant still in AWS. Raises AwsError when AWS cannot be asked."""
    run_tags = {tags.RUN_ID: scope.run_id, **({tags.VARIANT: scope.variant} if scope.variant else {})}
    found: list[Leftover] = []
    for region in scope.build_regions:
        builds = [b for b in {*seen.instances, *seen.key_pairs, *seen.security_groups} if scope.region_of(b) == region]
        instances = set(aws.instances_tagged(region, run_tags))
        announced = {i for b in builds for i in seen.instances.get(b, [])}
        if announced - instances:  # announced but untagged (tagging failed): is it still alive?
            instances |= announced & {i for i, _, _ in aws.instance_images(region)}
        found += [Leftover("instance", region, i) for i in sorted(instances)]
        own = key_pair_name(scope.run_id, scope.variant, region) if scope.variant else f"amibuild-{scope.run_id}-*"
        names = [own] + [k for b in builds for k in seen.key_pairs.get(b, [])]
        found += [Leftover("key-pair", region, k) for k in aws.key_pairs_named(region, sorted(set(names)))]
        # the temporary groups of the instances found by tag (and of those shutting down: Packer killed while
        # it waited for its instance to go), for when Packer's output is gone; only Packer's own temporary
        # groups, never a group the pipeline names (security_group_id); those that still exist
        ending = aws.instances_tagged(region, run_tags, states=("shutting-down", "terminated"))
        used = aws.instance_security_groups(region, sorted(instances | set(ending))).values()
        groups = set(aws.security_groups_named(region, sorted(
            {g for b in builds for g in seen.security_groups.get(b, [])} | {n for n in used if n.startswith(PACKER_GROUP_PREFIX)}
        )).values())
        found += [Leftover("security-group", region, gid) for gid in sorted(groups)]
        found += [Leftover("volume", region, v) for v in aws.volumes_tagged(region, run_tags)]
    for region in scope.regions:
        # disabled images too: still registered, hidden from DescribeImages without IncludeDisabled, and
        # their snapshots (tagged with the run) cannot go while they are
        images = aws.describe_images(region, owners=["self"], include_disabled=True,
                                     filters={"name": [f"{scope.ami_name_prefix}-*-{scope.run_id}" if scope.ami_name_prefix
                                                       else f"*-{scope.run_id}"]})
        found += [Leftover("image", region, image.image_id) for image in images]
        snapshots = {s for image in images for s in image.snapshot_ids} | set(aws.snapshots_tagged(region, run_tags))
        found += [Leftover("snapshot", region, s) for s in sorted(snapshots)]
    return found


def remove(aws: Aws, leftovers: Sequence[Leftover], *, settle: float = 60.0) -> tuple[list[Leftover], list[tuple[Leftover, str]]]:
    """Delete them in dependency order: (removed, [(not removed, why)]).

    A security group cannot go while a terminating instance still uses it: deleting it is retried
    until ``settle`` seconds after the instances were terminated. Once the endpoint is unreachable
    the rest is not tried.
    """
    removed: list[Leftover] = []
    failed: list[tuple[Leftover, str]] = []
    down: str | None = None

    def attempt(items: list[Leftover], delete, *args: object) -> None:
        """``delete(*args)`` removes ``items`` in one call; each is then removed, or failed with why."""
        nonlocal down
        if down:
            failed.extend((x, down) for x in items)
            return
        try:
            if delete(*args) is False:  # delete_snapshot: EC2 refused, an image still uses the snapshot
                failed.extend((x, "another image uses it (EC2 refused: InvalidSnapshot.InUse)") for x in items)
                return
            removed.extend(items)
        except EndpointUnreachable as exc:
            down = str(exc)
            failed.extend((x, down) for x in items)
        except AwsError as exc:
            failed.extend((x, str(exc)) for x in items)

    by_kind = {k: [x for x in leftovers if x.kind == k] for k in KINDS}
    for region in sorted({x.region for x in by_kind["instance"]}):
        items = [x for x in by_kind["instance"] if x.region == region]
        attempt(items, aws.terminate_instances, region, [x.id for x in items])
    for kind, delete in (("image", aws.deregister_image), ("snapshot", aws.delete_snapshot),
                         ("volume", aws.delete_volume), ("key-pair", aws.delete_key_pair)):
        for item in by_kind[kind]:
            attempt([item], delete, item.region, item.id)

    def held(item: Leftover) -> tuple[Leftover, str] | None:
        """Delete the group: its failure, taken back, while a terminating instance still holds it
        (tried again); None once it is gone or failed for good."""
        before = len(failed)
        attempt([item], aws.delete_security_group, item.region, item.id)
        if len(failed) == before or down or "DependencyViolation" not in failed[-1][1]:
            return None
        return failed.pop()

    deadline = time.monotonic() + settle
    for item in by_kind["security-group"]:
        # the instance is still shutting down and holds the group: again every 2 s until `settle` runs out
        waited = until(lambda item=item: held(item), done=lambda why: why is None, deadline=deadline, interval=2.0)
        if not waited.done:
            failed.append(waited.value)  # still held when `settle` ran out
    return removed, failed


@dataclass(frozen=True)
class CleanUp:
    """What the clean-up after a build that did not finish cleanly did: a sentence for the log and
    the outcome, and what the outcome records (None: it keeps what it holds)."""

    text: str
    removed: tuple[str, ...] | None = None
    left_behind: tuple[dict, ...] | None = None
    unreachable: bool = False  # the endpoint did not answer: the variant's later calls skip AWS


def clean_up(aws: Aws, scope: Scope, seen: StreamResources, *, look: bool = True, unreachable: bool = False) -> CleanUp:
    """Find and remove what one variant's build of this run left (`find`, `remove`). ``look`` False
    (a second Ctrl-C) or ``unreachable`` (a frozen endpoint would hold every lookup to its
    timeouts): no AWS calls, what Packer announced is listed, each with its command."""
    try:
        if not look:
            raise AwsError("stopped waiting (second interrupt)")
        if unreachable:
            raise EndpointUnreachable("the endpoint stopped answering during the build")
        found = find(aws, scope, seen)
    except AwsError as exc:
        return unchecked(scope, seen, str(exc), unreachable=isinstance(exc, EndpointUnreachable))
    gone = already_gone(announced(scope, seen), found)
    said = f"packer removed itself: {', '.join(str(x) for x in gone)}" if gone else ""
    if not found:
        return CleanUp(f"nothing left behind{'; ' + said if said else ''}",
                       removed=tuple(f"{x} (by packer)" for x in gone) if gone else None)
    removed, failed = remove(aws, found)
    text = "; ".join(part for part in (
        f"removed {len(removed)} leftover(s): {', '.join(str(x) for x in removed)}" if removed else "", said,
        "LEFT BEHIND: " + "; ".join(f"{x} ({x.command()})" for x, _ in failed) if failed else "") if part)
    return CleanUp(text, removed=tuple(f"{x} (by packer)" for x in gone) + tuple(str(x) for x in removed),
                   left_behind=tuple(_left(x, why) for x, why in failed))


def announced(scope: Scope, seen: StreamResources) -> list[Leftover]:
    """What Packer said it made (its instance, key pair, images, and security group by name)."""
    kinds = (("instance", seen.instances), ("key-pair", seen.key_pairs), ("image", seen.amis),
             ("security-group", seen.security_groups))
    return [Leftover(kind, scope.region_of(b), x) for kind, by_build in kinds for b, ids in by_build.items() for x in ids]


def already_gone(made: Sequence[Leftover], found: Sequence[Leftover]) -> list[Leftover]:
    """What Packer announced and the look in AWS no longer found: it removed them itself. Pure.

    A security group is announced by name and found by id: it is gone when no temporary group
    was found in its region at all."""
    present = set(found)
    groups_in = {x.region for x in found if x.kind == "security-group"}
    return [x for x in made if x not in present and not (x.kind == "security-group" and x.region in groups_in)]


def unchecked(scope: Scope, seen: StreamResources, why: str, *, unreachable: bool = False) -> CleanUp:
    """AWS was not asked (``why``): what Packer announced is listed, each with its command."""
    made = announced(scope, seen)
    return CleanUp(
        (f"could not look for leftovers ({why}); find them by tag {tags.RUN_ID}={scope.run_id} and AMI name "
         f"{scope.ami_name_prefix}-*-{scope.run_id} in {', '.join(scope.regions)}"
         + (" and remove " + "; ".join(str(x) for x in made) if made else "")),
        left_behind=tuple(_left(x, f"not checked: {why}") for x in made),
        unreachable=unreachable)


def _left(item: Leftover, why: str) -> dict:
    return {"kind": item.kind, "region": item.region, "id": item.id, "why": why, "command": item.command()}
