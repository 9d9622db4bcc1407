"""The emulator's image lifecycle, as EC2 has it and moto does not: deregistration protection,
deprecation, disabled images hidden from DescribeImages, and the Recycle Bin's side of
DeregisterImage and DeleteSnapshot.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from amibuild.sandbox import recyclebin
from amibuild.values import parse_iso_time

COOLDOWN = timedelta(hours=24)
_MAX_AHEAD = timedelta(days=3650)
_MAX_AHEAD_PUBLIC = timedelta(days=730)  # EnableImageDeprecation: a public image's limit counts from its creation


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def protection(ami: Any) -> str:
    """DescribeImages' DeregistrationProtection of ``ami`` now."""
    state = getattr(ami, "_amibuild_protection", "disabled")
    until = getattr(ami, "_amibuild_cooldown_until", None)
    if state == "disabled" and until is not None:
        if recyclebin.now() < until:
            return f"disabled-until {_iso(until)}"
        ami._amibuild_cooldown_until = None
    return state


def install() -> None:
    """Patch moto's EC2 image model and responses (once, in the emulator's process)."""
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError, InvalidAMIIdError, OperationNotPermitted
    from moto.ec2.models.amis import Ami, AmiBackend
    from moto.ec2.models.elastic_block_store import EBSBackend
    from moto.ec2.responses.amis import AmisResponse

    Ami.deregistration_protection = property(protection)
    Ami.deprecation_time = property(lambda ami: getattr(ami, "_amibuild_deprecation", None))

    def image(backend: Any, ami_id: str) -> Any:
        if ami_id not in backend.amis:
            raise InvalidAMIIdError(ami_id)
        return backend.amis[ami_id]

    original_deregister = AmiBackend.deregister_image

    def deregister_image(backend: Any, ami_id: str) -> None:
        ami = backend.amis.get(ami_id)
        if ami is not None:
            state = protection(ami)
            if state != "disabled":
                raise OperationNotPermitted(
                    f"The image {ami_id} can't be deregistered because deregistration protection is {state}. "
                    "Disable deregistration protection first.")
            recyclebin.keep_image(backend, ami)
        original_deregister(backend, ami_id)

    original_describe = AmiBackend.describe_images

    def describe_images(backend: Any, *args: Any, include_disabled: bool = False, **kwargs: Any) -> list[Any]:
        found = original_describe(backend, *args, **kwargs)
        return found if include_disabled else [ami for ami in found if ami.state != "disabled"]

    original_disable = AmiBackend.disable_image

    def disable_image(backend: Any, ami_id: str) -> None:
        original_disable(backend, ami_id)
        backend.amis[ami_id].launch_permissions.clear()  # a disabled image is private

    original_delete_snapshot = EBSBackend.delete_snapshot

    def delete_snapshot(backend: Any, snapshot_id: str) -> Any:
        snapshot = backend.snapshots.get(snapshot_id)
        removed = original_delete_snapshot(backend, snapshot_id)
        if snapshot is not None:
            recyclebin.keep_snapshot(backend, snapshot)
        return removed

    AmiBackend.deregister_image = deregister_image
    AmiBackend.describe_images = describe_images
    AmiBackend.disable_image = disable_image
    EBSBackend.delete_snapshot = delete_snapshot

    def flag(response: Any, name: str) -> bool:
        return str(response._get_param(name, "false")).lower() == "true"

    def describe(response: Any) -> ActionResult:
        response.error_on_dryrun()
        images = response.ec2_backend.describe_images(
            ami_ids=response._get_param("ImageIds", []), filters=response._filters_from_querystring(),
            exec_users=response._get_param("ExecutableUsers", []), owners=response._get_param("Owners", []),
            include_disabled=flag(response, "IncludeDisabled"))
        return ActionResult({"Images": images})

    def enable_protection(response: Any) -> ActionResult:
        ami = image(response.ec2_backend, response._get_param("ImageId"))
        response.error_on_dryrun()
        cooldown = flag(response, "WithCooldown")
        ami._amibuild_protection = "enabled-with-cooldown" if cooldown else "enabled"
        ami._amibuild_cooldown_until = None
        return ActionResult({"Return": "true"})

    def disable_protection(response: Any) -> ActionResult:
        ami = image(response.ec2_backend, response._get_param("ImageId"))
        response.error_on_dryrun()
        if getattr(ami, "_amibuild_protection", "disabled") == "enabled-with-cooldown":
            ami._amibuild_cooldown_until = recyclebin.now() + COOLDOWN
        ami._amibuild_protection = "disabled"
        return ActionResult({"Return": "true"})

    def enable_deprecation(response: Any) -> ActionResult:
        ami = image(response.ec2_backend, response._get_param("ImageId"))
        raw = response._get_param("DeprecateAt")
        response.error_on_dryrun()
        try:
            at = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
        except ValueError:
            raise EC2ClientError("InvalidParameterValue", f"Value ({raw}) for parameter DeprecateAt is invalid.") from None
        if at.tzinfo is None:
            at = at.replace(tzinfo=timezone.utc)
        at = (at + timedelta(seconds=30)).replace(second=0, microsecond=0)  # to the nearest minute
        now = recyclebin.now()
        if at <= now or at > now + _MAX_AHEAD:
            raise EC2ClientError("InvalidParameterValue",
                                 f"Value ({raw}) for parameter DeprecateAt is invalid. The time must be in the future "
                                 "and at most 10 years from now.")
        created = parse_iso_time(str(ami.creation_date))
        if ami.is_public and created is not None and at > created + _MAX_AHEAD_PUBLIC:
            raise EC2ClientError("InvalidParameterValue",
                                 f"Value ({raw}) for parameter DeprecateAt is invalid. A public image's deprecation "
                                 "time must be at most 2 years after its creation date.")
        ami._amibuild_deprecation = _iso(at)
        return ActionResult({"Return": "true"})

    def disable_deprecation(response: Any) -> ActionResult:
        ami = image(response.ec2_backend, response._get_param("ImageId"))
        response.error_on_dryrun()
        ami._amibuild_deprecation = None
        return ActionResult({"Return": "true"})

    AmisResponse.describe_images = describe
    AmisResponse.enable_image_deregistration_protection = enable_protection
    AmisResponse.disable_image_deregistration_protection = disable_protection
    AmisResponse.enable_image_deprecation = enable_deprecation
    AmisResponse.disable_image_deprecation = disable_deprecation
    recyclebin.install_ec2(AmisResponse)
