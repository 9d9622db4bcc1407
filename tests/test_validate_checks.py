"""`invoke validate`'s checks of many variant folders at once: every folder is checked, each failing
variant keeps its own message, and the passing ones are still reported, in variant order."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from amibuild.bake.packer import Packer
from amibuild.bake.prepare import check_directories
from amibuild.errors import PackerValidateError

pytestmark = pytest.mark.skipif(shutil.which("packer") is None, reason="no packer binary on PATH")

GOOD = """variable "greeting" {
  type    = string
  default = "hello"
}

source "null" "worker" {
  communicator = "none"
}

build {
  sources = ["source.null.worker"]
}
"""
# valid HCL that `packer validate` refuses: a build naming a source that does not exist
REFUSED = GOOD.replace('sources = ["source.null.worker"]', 'sources = ["source.null.nowhere"]')
# valid for packer, but not `packer fmt` clean
UNFORMATTED = GOOD.replace('  type    = string', '  type = string')


def folder(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.mkdir()
    (path / "amibuild.pkr.hcl").write_text(text)
    return path


def test_every_variant_is_checked_and_each_failure_keeps_its_own_message(tmp_path: Path) -> None:
    packer = Packer(env={"PATH": os.environ.get("PATH", os.defpath), "HOME": str(tmp_path)})
    names = [("a-good", GOOD), ("b-refused", REFUSED), ("c-good", GOOD), ("d-unformatted", UNFORMATTED)]
    folders = [folder(tmp_path, name, text) for name, text in names]
    valid: list[str] = []

    with pytest.raises(PackerValidateError) as caught:
        check_directories(packer, folders, valid=lambda d: valid.append(d.name))

    assert valid == ["a-good", "c-good"]
    message = str(caught.value)
    refused, unformatted = message.split(f"; {folders[3]}", 1)
    assert refused.startswith(f"packer validate refused {folders[1]}: ")
    assert unformatted == ": not `packer fmt` clean: amibuild.pkr.hcl"


def test_all_valid_raises_nothing_and_reports_every_folder(tmp_path: Path) -> None:
    packer = Packer(env={"PATH": os.environ.get("PATH", os.defpath), "HOME": str(tmp_path)})
    folders = [folder(tmp_path, f"v{i}", GOOD) for i in range(5)]
    valid: list[str] = []
    check_directories(packer, folders, valid=lambda d: valid.append(d.name))
    assert valid == [f"v{i}" for i in range(5)]
