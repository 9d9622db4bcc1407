"""EC2 and Auto Scaling calls of the gateway: images (typed `Image`), what prune must know and change,
build leftovers, and the launch template / Auto Scaling group reads and writes a rollout needs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from amibuild.errors import AwsError, EndpointUnreachable, NotFound
from amibuild.aws import handoff_results as results
from amibuild.aws.error_map import mapped_errors
from amibuild.aws.session import fan_out
from botocore.config import Config


@dataclass(frozen=True)
class Image:
    """The parts of an EC2 image amibuild uses."""

    image_id: str
    region: str
    name: str
    state: str
    tags: Mapping[str, str]
    creation_date: str
    snapshot_ids: tuple[str, ...] = ()
    protection: str = "disabled"  # DeregistrationProtection: enabled, enabled-with-cooldown, disabled-until T, disabled
    deprecation_time: str = ""  # DeprecationTime, "" when none is set


def _image(raw: Mapping[str, Any], region: str) -> Image:
    protection = raw.get("DeregistrationProtection") or "disabled"
    return Image(
        image_id=raw["ImageId"],
        region=region,
        name=raw.get("Name", ""),
        state=raw.get("State", "unknown"),
        tags={t["Key"]: t["Value"] for t in raw.get("Tags", [])},
        creation_date=raw.get("CreationDate", ""),
        snapshot_ids=tuple(
            m["Ebs"]["SnapshotId"] for m in raw.get("BlockDeviceMappings", []) if m.get("Ebs", {}).get("SnapshotId")
        ),
        # protection without a cooldown may read "enabled-without-cooldown": amibuild's word for it is "enabled"
        protection="enabled" if protection == "enabled-without-cooldown" else protection,
        deprecation_time=raw.get("DeprecationTime") or "",
    )


# Pages of the largest size AWS serves (MaxResults 1,000 for both): a region's thousands of images or
# instances in one answer would outlast the read timeout; smaller pages would cost more calls.
IMAGE_PAGE = 1000
INSTANCE_PAGE = 1000


IDS_PER_FILTER = 200  # EC2 takes up to 200 values in one filter
LIVE_STATES = ("pending", "running", "stopping", "stopped")  # an instance's states before it is terminated


def instances(pages: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """The instances of DescribeInstances' pages, out of their reservations."""
    return (raw for page in pages for reservation in page.get("Reservations", []) for raw in reservation.get("Instances", []))


def filter_list(filters: Mapping[str, Iterable[str]]) -> list[dict[str, Any]]:
    """EC2's ``Filters`` parameter: one {Name, Values} per filter name."""
    return [{"Name": name, "Values": list(values)} for name, values in filters.items()]


def _tagged(tags: Mapping[str, str]) -> dict[str, list[str]]:
    """A ``tag:KEY`` filter per tag: the resource carries every one of `tags`."""
    return {f"tag:{k}": [v] for k, v in tags.items()}


class Ec2Calls:
    """EC2 and Auto Scaling calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def describe_images(self, region: str, *, image_ids: Sequence[str] = (), owners: Sequence[str] = (),
                        filters: Mapping[str, Sequence[str]] | None = None, include_disabled: bool = False) -> list[Image]:
        given = {"IncludeDisabled": include_disabled, "ImageIds": list(image_ids), "Owners": list(owners),
                 "Filters": filter_list(filters or {})}
        return self._images(region, **{key: value for key, value in given.items() if value})

    def _images(self, region: str, **kwargs: Any) -> list[Image]:
        with mapped_errors("ec2:DescribeImages", region):
            pages = self.client("ec2", region).get_paginator("describe_images").paginate(**kwargs)
            return [_image(raw, region) for page in pages for raw in page.get("Images", [])]

    def instances_where(self, region: str, **kwargs: Any) -> list[Mapping[str, Any]]:
        """Every instance DescribeInstances answers with for these parameters, all pages read."""
        with mapped_errors("ec2:DescribeInstances", region):
            return list(instances(self.client("ec2", region).get_paginator("describe_instances").paginate(**kwargs)))

    # -- EC2 reads for publishing (amibuild/channels/publish.py) --------------------------

    def find_image(self, region: str, image_id: str) -> Image | None:
        """One image by id, disabled ones included; None when it does not exist (or was deregistered)."""
        try:
            with mapped_errors(f"ec2:DescribeImages {image_id}", region):
                raws = self.client("ec2", region).describe_images(ImageIds=[image_id], IncludeDisabled=True)["Images"]
        except NotFound:
            return None
        return next((_image(raw, region) for raw in raws if raw.get("ImageId") == image_id), None)

    def find_images(self, region: str, image_ids: Sequence[str]) -> dict[str, Image]:
        """Images by id in one region, disabled ones included; an id that no longer exists is left out.

        An `image-id` filter, not ImageIds: one deregistered id would fail an ImageIds call as a whole
        (InvalidAMIID.NotFound). At most IDS_PER_FILTER ids a call, the values EC2 takes in one filter."""
        ids = sorted(set(image_ids))
        chunks = [ids[start:start + IDS_PER_FILTER] for start in range(0, len(ids), IDS_PER_FILTER)]
        return {image.image_id: image for chunk in chunks
                for image in self.describe_images(region, filters={"image-id": chunk}, include_disabled=True)
                if image.image_id in chunk}

    def images_at(self, pairs: Iterable[tuple[str, str]], *,
                  each: Callable[[str, Callable[[], dict[str, Image]]], dict[str, Image] | None] = lambda _r, read: read(),
                  ) -> dict[tuple[str, str], Image | None]:
        """The image of each (region, AMI), None where it is gone: `find_images` per region, the regions at
        once. `each(region, read)` runs a region's read (a deadline's bookkeeping, say)."""
        by_region: dict[str, list[str]] = {}
        for region, ami in sorted(set(pairs)):
            by_region.setdefault(region, []).append(ami)
        found = fan_out(sorted(by_region), lambda r: each(r, lambda: self.find_images(r, by_region[r])))
        return {(r, a): (found.get(r) or {}).get(a) for r, amis in by_region.items() for a in amis}

    def snapshot_volume_users(self, region: str, snapshot_id: str) -> frozenset[str]:
        """Account ids allowed to create volumes from the snapshot (its createVolumePermission)."""
        with mapped_errors(f"ec2:DescribeSnapshotAttribute {snapshot_id}", region):
            raw = self.client("ec2", region).describe_snapshot_attribute(
                SnapshotId=snapshot_id, Attribute="createVolumePermission"
            )
        return frozenset(p["UserId"] for p in raw.get("CreateVolumePermissions", []) if p.get("UserId"))

    # ---------------------------------------------------------------------------- EC2 lifecycle (prune)

    # What `amibuild.lifecycle.prune` needs to know before it may delete an image (which snapshots are ours,
    # which launch templates, Auto Scaling groups and instances still use an image), and the three
    # changes it makes. Plain tuples keep the gateway's surface small; prune.py names the fields.

    def own_images(self, region: str, filters: Mapping[str, Sequence[str]], *,
                   include_disabled: bool = False) -> list[tuple[Image, str]]:
        """(image, its DeprecationTime or "") of this account's images matching `filters`.

        An owner's DescribeImages lists its deprecated images too, whatever IncludeDeprecated says;
        disabled ones only with `include_disabled` (IncludeDisabled).
        """
        extra: dict[str, Any] = {"IncludeDisabled": True} if include_disabled else {}
        images = self._images(region, Owners=["self"], Filters=filter_list(filters), PaginationConfig={"PageSize": IMAGE_PAGE},
                              **extra)
        return [(image, image.deprecation_time) for image in images]

    def snapshot_tags(self, region: str, snapshot_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Tags of this account's snapshots among `snapshot_ids`, by id; ids that do not exist are left out.

        A ``snapshot-id`` filter instead of ``SnapshotIds``: one missing id must not fail the whole call.
        """
        ids = sorted(set(snapshot_ids))

        def chunk(start: int) -> dict[str, dict[str, str]]:
            with mapped_errors("ec2:DescribeSnapshots", region):
                pages = self.client("ec2", region).get_paginator("describe_snapshots").paginate(
                    OwnerIds=["self"], Filters=filter_list({"snapshot-id": ids[start:start + IDS_PER_FILTER]}))
                return {raw["SnapshotId"]: {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
                        for page in pages for raw in page.get("Snapshots", [])}

        # the chunks go out at once: the bucket (20 a second, 100 at once), not a chain of round trips, sets the pace
        return {snapshot: its_tags for part in fan_out(range(0, len(ids), IDS_PER_FILTER), chunk).values()
                for snapshot, its_tags in part.items()}

    def launch_templates(self, region: str) -> list[tuple[str, str, int, int]]:
        """(id, name, default version, latest version) of every launch template in the region."""
        with mapped_errors("ec2:DescribeLaunchTemplates", region):
            pages = self.client("ec2", region).get_paginator("describe_launch_templates").paginate()
            return [
                (raw["LaunchTemplateId"], raw.get("LaunchTemplateName", ""), int(raw.get("DefaultVersionNumber", 0)),
                 int(raw.get("LatestVersionNumber", 0)))
                for page in pages for raw in page.get("LaunchTemplates", [])
            ]

    def launch_template_image_ids(self, region: str, template_id: str, versions: Sequence[str]) -> dict[int, str]:
        """Version number -> ImageId for `versions` ("$Default", "$Latest" or numbers) of one template.

        ``ResolveAlias`` makes EC2 answer the AMI id behind an ``resolve:ssm:...`` ImageId; a version
        without an ImageId is left out; a template deleted since it was listed (Karpenter's come and
        go) launches nothing: {}.
        """
        client = self.client("ec2", region)
        with mapped_errors(f"ec2:DescribeLaunchTemplateVersions {template_id}", region):
            try:
                raws = client.describe_launch_template_versions(
                    LaunchTemplateId=template_id, Versions=list(dict.fromkeys(versions)), ResolveAlias=True
                ).get("LaunchTemplateVersions", [])
            except client.exceptions.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "InvalidLaunchTemplateId.NotFound":
                    raise
                return {}
        return {int(raw["VersionNumber"]): raw["LaunchTemplateData"]["ImageId"]
                for raw in raws if raw.get("LaunchTemplateData", {}).get("ImageId")}

    def launch_configuration_images(self, region: str) -> dict[str, str]:
        """Launch configuration name -> ImageId (the older, immutable way an Auto Scaling group launches)."""
        with mapped_errors("autoscaling:DescribeLaunchConfigurations", region):
            pages = self.client("autoscaling", region).get_paginator("describe_launch_configurations").paginate()
            return {raw["LaunchConfigurationName"]: raw.get("ImageId", "")
                    for page in pages for raw in page.get("LaunchConfigurations", [])}

    def instance_images(self, region: str) -> list[tuple[str, str, str]]:
        """(instance id, state, image id) of every instance not terminated (or shutting down)."""
        raws = self.instances_where(region, Filters=filter_list({"instance-state-name": LIVE_STATES}),
                               PaginationConfig={"PageSize": INSTANCE_PAGE})
        return [(raw["InstanceId"], raw.get("State", {}).get("Name", ""), raw.get("ImageId", "")) for raw in raws]

    def deregister_image(self, region: str, image_id: str) -> None:
        with mapped_errors(f"ec2:DeregisterImage {image_id}", region):
            self.client("ec2", region).deregister_image(ImageId=image_id)

    def delete_snapshot(self, region: str, snapshot_id: str) -> bool:
        """Delete the snapshot; False when EC2 refuses because an image uses it (InvalidSnapshot.InUse):
        one registered from it elsewhere, which a deregistered image's snapshot can still back."""
        client = self.client("ec2", region)
        with mapped_errors(f"ec2:DeleteSnapshot {snapshot_id}", region):
            try:
                client.delete_snapshot(SnapshotId=snapshot_id)
            except client.exceptions.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "InvalidSnapshot.InUse":
                    raise
                return False
        return True

    def deprecate_image(self, region: str, image_id: str, at: datetime) -> None:
        """Set the image's deprecation time (EC2 refuses a time in the past and rounds to the minute)."""
        with mapped_errors(f"ec2:EnableImageDeprecation {image_id}", region):
            self.client("ec2", region).enable_image_deprecation(ImageId=image_id, DeprecateAt=at)

    # ---------------------------------------------------------------------------- build leftovers

    def ec2_reachable(self, region: str) -> str | None:
        """None when the EC2 endpoint answers one cheap call at once, else why not (no retries)."""
        client = self._own_client("ec2:probe", region, lambda: self._config.merge(Config(
            connect_timeout=3, read_timeout=5, retries={"mode": "standard", "total_max_attempts": 1})))
        try:
            with mapped_errors("ec2:DescribeInstances", region):
                client.describe_instances(MaxResults=5)
        except EndpointUnreachable as exc:
            return str(exc)
        except AwsError:
            return None  # it answered, even if with a refusal
        return None

    def instances_tagged(self, region: str, tags: Mapping[str, str], states: Sequence[str] = LIVE_STATES) -> list[str]:
        """Ids of instances in `states` (by default: not terminated or shutting down) carrying every tag in `tags`."""
        filters = filter_list({**_tagged(tags), "instance-state-name": list(states)})
        return sorted(raw["InstanceId"] for raw in self.instances_where(region, Filters=filters))

    def instance_security_groups(self, region: str, instance_ids: Sequence[str]) -> dict[str, str]:
        """Group id -> name of the security groups these instances use."""
        if not instance_ids:
            return {}
        raws = self.instances_where(region, Filters=filter_list({"instance-id": instance_ids}))
        return {g["GroupId"]: g.get("GroupName", "") for raw in raws for g in raw.get("SecurityGroups", [])}

    def terminate_instances(self, region: str, instance_ids: Sequence[str]) -> None:
        with mapped_errors(f"ec2:TerminateInstances {' '.join(instance_ids)}", region):
            self.client("ec2", region).terminate_instances(InstanceIds=list(instance_ids))

    def key_pairs_named(self, region: str, names: Sequence[str]) -> list[str]:
        """Which of these key pair names exist (a filter, so a missing name does not fail the call)."""
        if not names:
            return []
        with mapped_errors("ec2:DescribeKeyPairs", region):
            raw = self.client("ec2", region).describe_key_pairs(Filters=filter_list({"key-name": names}))
        return sorted(k["KeyName"] for k in raw.get("KeyPairs", []))

    def delete_key_pair(self, region: str, name: str) -> None:
        with mapped_errors(f"ec2:DeleteKeyPair {name}", region):
            self.client("ec2", region).delete_key_pair(KeyName=name)

    def security_groups_named(self, region: str, names: Sequence[str]) -> dict[str, str]:
        """Group name -> id for those of `names` that exist."""
        if not names:
            return {}
        with mapped_errors("ec2:DescribeSecurityGroups", region):
            raw = self.client("ec2", region).describe_security_groups(Filters=filter_list({"group-name": names}))
        return {g["GroupName"]: g["GroupId"] for g in raw.get("SecurityGroups", [])}

    def delete_security_group(self, region: str, group_id: str) -> None:
        with mapped_errors(f"ec2:DeleteSecurityGroup {group_id}", region):
            self.client("ec2", region).delete_security_group(GroupId=group_id)

    def volumes_tagged(self, region: str, tags: Mapping[str, str]) -> list[str]:
        """Ids of volumes not attached to anything that carry every tag in `tags`."""
        with mapped_errors("ec2:DescribeVolumes", region):
            pages = self.client("ec2", region).get_paginator("describe_volumes").paginate(
                Filters=filter_list({**_tagged(tags), "status": ["available"]}))
            return sorted(v["VolumeId"] for page in pages for v in page.get("Volumes", []))

    def delete_volume(self, region: str, volume_id: str) -> None:
        with mapped_errors(f"ec2:DeleteVolume {volume_id}", region):
            self.client("ec2", region).delete_volume(VolumeId=volume_id)

    def snapshots_tagged(self, region: str, tags: Mapping[str, str]) -> list[str]:
        """Ids of this account's snapshots carrying every tag in `tags`."""
        with mapped_errors("ec2:DescribeSnapshots", region):
            pages = self.client("ec2", region).get_paginator("describe_snapshots").paginate(
                OwnerIds=["self"], Filters=filter_list(_tagged(tags)))
            return sorted(s["SnapshotId"] for page in pages for s in page.get("Snapshots", []))

    # ---------------------------------------------------------------------------- rollout (typed results from handoff_results.py)

    def auto_scaling_group(self, name: str, region: str) -> results.AutoScalingGroup | None:
        with mapped_errors(f"autoscaling:DescribeAutoScalingGroups {name}", region):
            groups = self.client("autoscaling", region).describe_auto_scaling_groups(
                AutoScalingGroupNames=[name]
            ).get("AutoScalingGroups", [])
        return results.parse_auto_scaling_group(groups[0]) if groups else None

    def launch_template_version(self, template_id: str, version: str, region: str) -> results.LaunchTemplateVersion | None:
        """One version of a launch template (a number, ``$Latest`` or ``$Default``); None when missing."""
        try:
            with mapped_errors(f"ec2:DescribeLaunchTemplateVersions {template_id} {version}", region):
                versions = self.client("ec2", region).describe_launch_template_versions(
                    LaunchTemplateId=template_id, Versions=[str(version)]
                ).get("LaunchTemplateVersions", [])
        except NotFound:
            return None
        return results.parse_launch_template_version(versions[0]) if versions else None

    def create_launch_template_version(self, template_id: str, region: str, *, source_version: str, image_id: str,
                                       description: str) -> int:
        """A new version copied from `source_version` with another ImageId; its number."""
        with mapped_errors(f"ec2:CreateLaunchTemplateVersion {template_id}", region):
            raw = self.client("ec2", region).create_launch_template_version(
                LaunchTemplateId=template_id, SourceVersion=str(source_version), VersionDescription=description,
                LaunchTemplateData={"ImageId": image_id},
            )
        return int(raw["LaunchTemplateVersion"]["VersionNumber"])
