"""The sandbox is an annex: outside amibuild/sandbox/ no module names it or a stand-in, only the
CLI imports it, and no two modules share a file name."""

import re
from collections import defaultdict
from pathlib import Path

import pytest

from amibuild.cli import target
from amibuild.errors import SpecError
from amibuild.jobs.platform import Platform
from amibuild.render import Target

PACKAGE = Path(__file__).resolve().parent.parent / "amibuild"
# "sandbox", "sandboxes", "sandboxed", "stand-in(s)", "standin(s)" as words of code, names
# (AMIBUILD_SANDBOX_X, in_sandbox) and prose alike; "standing" is another word, and so is AL2's
# sandbox-image.service (the EKS AMI's unit that pulls the pause image).
NAMES_IT = re.compile(r"(?<![a-z])(sandbox(?:e[sd])?(?!-image(?![a-z]))|stand-?ins?)(?![a-z])", re.IGNORECASE)
STAND_IN = re.compile(r"(?<![a-z])stand-?ins?(?![a-z])", re.IGNORECASE)

# The CLI modules that must name the sandbox, each for one reason; nothing else outside the annex.
MAY_NAME_THE_SANDBOX = {
    "cli/target.py": "the one place AMIBUILD_TARGET=sandbox selects the emulator's platform",
    "cli/tasks_sandbox.py": "the `sandbox` and `demo` tasks, which start the emulator",
    "cli/tasks.py": "puts the `sandbox` and `demo` tasks, with their requests, in the task table",
    "cli/run.py": "the one hint, on missing credentials or an unreachable endpoint (doctor's too), to run `amibuild sandbox`",
}
# The rehearsal plays yum, rpm, systemctl, ... with stand-ins of its own (rehearse/standins/): it may
# say so, but never "sandbox".
MAY_SAY_STAND_IN = "rehearse/"


def _outside_the_annex():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if not relative.startswith("sandbox/"):
            yield relative, path.read_text()


def test_no_module_outside_the_sandbox_names_the_sandbox_or_a_stand_in() -> None:
    found = []
    for relative, text in _outside_the_annex():
        if relative in MAY_NAME_THE_SANDBOX:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for match in NAMES_IT.finditer(line):
                if relative.startswith(MAY_SAY_STAND_IN) and STAND_IN.fullmatch(match.group(0)):
                    continue
                found.append(f"amibuild/{relative}:{number}: {line.strip()}")
    assert not found, "outside amibuild/sandbox/, these name the sandbox or a stand-in:\n" + "\n".join(found)


def test_the_word_check_catches_the_names_it_is_for() -> None:
    said = ["in_sandbox(os.environ)", "AMIBUILD_SANDBOX_IMAGES", "the sandbox's stand-in", "sandboxed", "STANDIN_GAP",
            "the standins/ folder", "amibuild.sandbox.transform"]
    assert all(NAMES_IT.search(s) for s in said)
    assert not any(NAMES_IT.search(s) for s in ["Standing.ORPHANED", "r.standing", "outstanding", "sandboxing"[:0],
                                                "sandbox-image.service"])
    assert NAMES_IT.search("the sandbox-images folder") and NAMES_IT.search("sandbox images")


def test_only_the_cli_imports_the_sandbox() -> None:
    imports = re.compile(r"^\s*(?:from amibuild(?:\.sandbox\b| import sandbox\b)|import amibuild\.sandbox\b)", re.MULTILINE)
    found = [relative for relative, text in _outside_the_annex()
             if imports.search(text) and not relative.startswith("cli/")]
    assert not found, f"only amibuild/cli/ imports amibuild.sandbox; these do too: {found}"


def test_the_target_is_chosen_by_amibuild_target_never_guessed_from_the_endpoint() -> None:
    loopback = "http://127.0.0.1:4566"
    real = target.platform({"AWS_ENDPOINT_URL": loopback})  # a local proxy in front of AWS is still AWS
    assert real == Platform(target=Target(loopback)) and real.transform is None and real.poll_seconds == 5.0
    assert target.platform({}) == Platform() == target.platform({"AMIBUILD_TARGET": "aws"})
    emulated = target.platform({"AMIBUILD_TARGET": "sandbox", "AWS_ENDPOINT_URL": loopback})
    assert emulated.name == "sandbox" and emulated.target == Target(loopback)
    assert emulated.transform is not None and emulated.poll_seconds < 1
    with pytest.raises(SpecError, match=r"AMIBUILD_TARGET='moto': one of aws .* or sandbox"):
        target.platform({"AMIBUILD_TARGET": "moto"})


def test_the_sandbox_exports_its_target(sandbox) -> None:
    assert sandbox.env()["AMIBUILD_TARGET"] == "sandbox"


def test_no_two_modules_share_a_file_name() -> None:
    """A walk of a name lands in one module: no job.py in four packages. __init__.py and __main__.py
    are Python's own names for a package and its `python -m` entry."""
    where = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            where[path.name].append(path.relative_to(PACKAGE).as_posix())
    twins = {name: sorted(paths) for name, paths in where.items() if len(paths) > 1}
    assert not twins, f"module-name twins: {twins}"
