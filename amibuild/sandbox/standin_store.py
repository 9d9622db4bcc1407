"""Where the sandbox keeps its images' stand-ins, and where in a sandbox build the real chain is.

Light on purpose: the build's transform (`amibuild.sandbox.transform`) and the emulator's process
need these names without the stand-in runner (`amibuild.sandbox.image_standin`) and the rehearsal
machinery it brings.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping

STANDIN_DIR = "instance"  # the sandbox build's copy of the real build's files
# where sandbox builds keep their images' stand-ins (by fingerprint) for the boot test; the emulator
# reads them there. Fixed by the process that starts Packer (each Packer gets its own TMPDIR).
STORE_ENV = "AMIBUILD_SANDBOX_IMAGES"
# the sandbox build's list of the variant's stage-1 checks (name, command, timeout): its stand-in runs each alone
CHECKS_LIST = "scripts/amibuild-checks.json"
# what a rehearsal stand-in exits with when it cannot answer (amibuild/rehearse/standins/standin.sh)
STANDIN_GAP = 97


def store(env: Mapping[str, str] | None = None) -> Path:
    """The folder stand-ins are kept in: $AMIBUILD_SANDBOX_IMAGES, else one under the temp folder."""
    env = os.environ if env is None else env
    return Path(env.get(STORE_ENV) or Path(tempfile.gettempdir()) / "amibuild-sandbox-images")
