"""The stand-ins of the sandbox's images go with their images (runs in the emulator's process).

A sandbox build keeps its image's stand-in (`amibuild.sandbox.image_standin.keep`) in the sandbox's
store, by fingerprint: what SSM Run Command runs a boot test's checks on. Without this they would
pile up. `install` makes DeregisterImage (prune, clean-run, by hand) remove the stand-in once no
image with that fingerprint is left in any seeded region (copies share their source's fingerprint);
`clear` empties the store when the sandbox is reset, since every image goes then. The parent
(`Sandbox.stop`) removes the store itself with the sandbox's other state.
"""

from __future__ import annotations

import shutil
from typing import Any

from amibuild.sandbox.seed import SEED_REGIONS

FINGERPRINT_TAG = "amibuild:fingerprint"


def _store():
    from amibuild.sandbox import image_standin as standin  # deferred: the stand-in machinery only once an image goes

    return standin.store()


def install() -> None:
    """Patch moto's DeregisterImage (called once in the emulator's process)."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import AmiBackend

    original = AmiBackend.deregister_image

    def deregister_image(self: Any, ami_id: str) -> None:
        fingerprint = self.tags.get(ami_id, {}).get(FINGERPRINT_TAG, "")
        original(self, ami_id)
        if not fingerprint or "/" in fingerprint or fingerprint.startswith("."):
            return
        for region in {*SEED_REGIONS, self.region_name}:
            backend = ec2_backends[self.account_id][region]
            if any(backend.tags.get(image, {}).get(FINGERPRINT_TAG) == fingerprint for image in backend.amis):
                return
        shutil.rmtree(_store() / fingerprint, ignore_errors=True)

    AmiBackend.deregister_image = deregister_image


def clear() -> list[str]:
    """Remove every stand-in in the store (a reset drops every image); the fingerprints removed."""
    store = _store()
    if not store.is_dir():
        return []
    removed = []
    for entry in sorted(store.iterdir()):
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return removed
