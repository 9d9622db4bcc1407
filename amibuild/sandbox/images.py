"""The one shape of a seeded image: an entry of the ``MOTO_AMIS_PATH`` file (moto's ``Ami`` arguments)."""

from __future__ import annotations

from typing import Any


def moto_ami(image_id: str, name: str, *, description: str, owner: str, arch: str, creation_date: str) -> dict[str, Any]:
    """A public, available, EBS-backed HVM image as AWS publishes them (Packer refuses a source
    whose root device is not EBS-backed)."""
    return {
        "ami_id": image_id,
        "name": name,
        "description": description,
        "owner_id": owner,
        "public": True,
        "virtualization_type": "hvm",
        "architecture": arch,
        "state": "available",
        "platform": None,
        "image_type": "machine",
        "image_location": f"amazon/{name}",
        "hypervisor": "xen",
        "root_device_name": "/dev/xvda",
        "root_device_type": "ebs",
        "sriov": "simple",
        "boot_mode": "uefi" if arch == "arm64" else "legacy-bios",
        "creation_date": creation_date,
    }
