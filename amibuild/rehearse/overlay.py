"""Run rehearsal steps in a throwaway copy of this machine: an overlay over `/`, no network.

`run_steps` writes each step into a folder (the script or inline file to upload, the filled-in
command, the uploads), puts the stand-ins first on the copy's PATH, and runs ``standins/enter.sh``
under ``unshare --mount --net --pid --ipc --uts --fork``: a private mount namespace with an
overlay whose upper layer is a temp folder, its own (empty) network namespace, then chroot. Every
write of the chain lands in that upper layer; the host's files are never written. Afterwards the
upper layer is read for what the chain wrote under /etc, the stand-ins' state for what it
installed and enabled, and the temp folder is removed (``keep`` leaves it). A kept run can become
the ``base`` of later runs (`keep_as_base`): each starts from a copy of its upper layer.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence

from amibuild.errors import RehearsalError, RehearsalUnavailable
from amibuild.rehearse.steps import Step

STANDINS = Path(str(resources.files("amibuild.rehearse") / "standins"))
# Folders every Amazon Linux has (a list kept beside the stand-ins, see the file).
FOLDERS_FILE = STANDINS / "amazon-linux-folders.txt"

# Every tool a stand-in plays, first on the PATH inside the copy (see standins/standin.sh), and the
# package tools each Amazon Linux has: a chain that picks dnf when it is there must not find it on AL2.
PACKAGE_TOOLS = {
    "al2": ("yum", "yum-config-manager", "amazon-linux-extras"),
    "al2023": ("dnf", "yum", "yum-config-manager"),
}
STANDIN_TOOLS = (
    "rpm", "systemctl", "service", "chkconfig", "modprobe",
    "aws", "curl", "wget", "cfn-signal", "sudo", "uname", "sysctl", "iptables-save", "ip6tables-save",
    "iptables", "ip6tables", "reboot", "shutdown", "poweroff", "grubby", "dracut", "package-cleanup", "ethtool",
    "ipvsadm", "mdadm", "udevadm", "hostnamectl", "setenforce", "sleep", "update-ca-trust", "restorecon", "mount",
    "swapoff", "nerdctl", "gpg", "gpg2",
)
# Absolute paths chains call directly; given a stand-in in the copy when this machine lacks them.
STANDIN_PATHS = ("/sbin/iptables-save", "/sbin/ip6tables-save", "/usr/sbin/iptables-save")
OS_RELEASE = {
    "al2": {
        "etc/os-release": 'NAME="Amazon Linux"\nVERSION="2"\nID="amzn"\nID_LIKE="centos rhel fedora"\n'
                          'VERSION_ID="2"\nPRETTY_NAME="Amazon Linux 2"\nCPE_NAME="cpe:2.3:o:amazon:amazon_linux:2"\n',
        "etc/system-release": "Amazon Linux release 2 (Karoo)\n",
    },
    "al2023": {
        "etc/os-release": 'NAME="Amazon Linux"\nVERSION="2023"\nID="amzn"\nID_LIKE="fedora"\nVERSION_ID="2023"\n'
                          'PLATFORM_ID="platform:al2023"\nPRETTY_NAME="Amazon Linux 2023"\n'
                          'CPE_NAME="cpe:2.3:o:amazon:amazon_linux:2023"\n',
        "etc/system-release": "Amazon Linux release 2023 (Amazon Linux)\n",
    },
}
AMAZON_LINUX_FILES = {
    "etc/cloud/cloud.cfg": (
        "users:\n - default\n"
        "cloud_init_modules:\n - migrator\n - bootcmd\n - write-files\n - growpart\n - resizefs\n"
        "cloud_config_modules:\n - mounts\n - locale\n - set-passwords\n - yum-add-repo\n"
        " - package-update-upgrade-install\n - timezone\n - runcmd\n"
        "cloud_final_modules:\n - scripts-per-once\n - scripts-user\n - ssh-authkey-fingerprints\n"
        "system_info:\n  default_user:\n    name: ec2-user\n"
    ),    # the kernel command line chains extend (AL2023's set-kernel-arg sources and edits it)
    "etc/default/grub": (
        'GRUB_CMDLINE_LINUX_DEFAULT="console=tty0 console=ttyS0,115200n8 nvme_core.io_timeout=4294967295"\n'
        'GRUB_CMDLINE_LINUX=""\nGRUB_TIMEOUT=0\nGRUB_ENABLE_BLSCFG=true\n'
    ),
}
# what `useradd` writes when runner.sh creates the build user (before any step)
USERADD_FILES = tuple(f"etc/{name}{suffix}" for name in ("passwd", "group", "shadow", "gshadow", "subuid", "subgid")
                      for suffix in ("", "-")) + ("etc/.pwd.lock",)
NEEDED = ("unshare", "chroot", "setpriv", "useradd")
# what the stand-ins know of a base's chain (what it installed, enabled and pulled), carried into runs on it
BASE_STATE = ("packages", "units", "images")
IO = ".amibuild-rehearse"  # where the step folders appear inside the copy


@dataclass
class RawResult:
    """What one step did, as read back from its folder."""

    step: Step
    ran: bool
    exit_status: int | None = None
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""


@dataclass
class RawRun:
    results: list[RawResult]
    calls: list[tuple[str, str, str]]  # (step, tool, arguments)
    gaps: list[tuple[str, str]]  # (step, call)
    errors: list[tuple[str, int, int, str]]  # ERR hook: (script, line, status, command)
    packages: list[tuple[str, str]]
    units: list[tuple[str, str]]
    etc_written: list[str]
    etc_removed: list[str]
    timed_out: bool
    kept: Path | None
    notes: list[str] = field(default_factory=list)
    stood_in: list[tuple[str, str]] = field(default_factory=list)  # (step, what a stand-in did instead)


def check_privileges() -> None:
    """Refuse, before anything is done, where the copy cannot be made."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        raise RehearsalUnavailable("rehearse needs Linux: an overlay of / in a private mount namespace")
    if os.geteuid() != 0:
        raise RehearsalUnavailable(
            "rehearse needs root: it mounts an overlay of / in a private mount namespace (run it as root, "
            "as CI and the development machines do)")
    missing = [tool for tool in NEEDED if shutil.which(tool) is None]
    if missing:
        raise RehearsalUnavailable(f"rehearse needs {', '.join(missing)} on PATH (util-linux, coreutils, passwd)")


def run_steps(steps: Sequence[Step], *, arch: str, os_name: str = "al2", refuse: Iterable[str] = (), keep: bool = False,
              timeout: float = 600.0, temp_dir: str | None = None, base: Path | None = None) -> RawRun:
    """Run the steps in a throwaway copy of this machine; see the module docstring. On a ``base``
    (`keep_as_base`) the copy starts where that run's chain left it."""
    top = Path(tempfile.mkdtemp(prefix="amibuild-rehearse-", dir=temp_dir))
    done = None
    try:
        done = _run(top, steps, arch=arch, os_name=os_name, refuse=refuse, keep=keep, timeout=timeout, base=base)
        return done
    finally:
        if not keep or done is None:  # a run that raised is not kept either
            shutil.rmtree(top, ignore_errors=True)


def keep_as_base(top: Path, dest: Path) -> bool:
    """Make the run kept in ``top`` (``run_steps(keep=True)``) a base for later runs, at ``dest`` on
    the same file system: its upper layer and the stand-ins' state move there, the rest goes. False
    when another made ``dest`` first (that one stays)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        (top / "upper").rename(staging / "upper")  # a rename keeps the overlay's whiteouts and xattrs
        (top / "io" / "state").rename(staging / "state")
        staging.rename(dest)
        return True
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return False
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _run(top: Path, steps: Sequence[Step], *, arch: str, os_name: str, refuse: Iterable[str], keep: bool, timeout: float,
         base: Path | None) -> RawRun:
    os.chmod(top, 0o755)  # the build user reads the uploads from inside
    for name in ("upper", "work", "merged", "io/state", "io/steps", "io/bin"):
        (top / name).mkdir(parents=True)
    io = top / "io"
    state = io / "state"
    (state / "arch").write_text(arch)
    (state / "refuse").write_text("".join(f"{name}\n" for name in refuse))
    # stand-ins run as the build user as well as root: both write the state
    for name in ("calls", "gaps", "errors", "packages", "units", "step", "stood_in", "images"):
        (state / name).touch()
    for name in BASE_STATE if base else ():
        if (base / "state" / name).is_file():
            shutil.copyfile(base / "state" / name, state / name)
    for path in state.iterdir():
        path.chmod(0o666)
    state.chmod(0o777)
    for script in ("runner.sh", "errhook.sh", "standin.sh"):
        shutil.copy(STANDINS / script, io / script)
    (io / "standin.sh").chmod(0o755)
    for tool in PACKAGE_TOOLS[os_name] + STANDIN_TOOLS:
        (io / "bin" / tool).symlink_to(f"/{IO}/standin.sh")
    if base is None:
        _seed_upper(top / "upper", os_name)
    else:  # its seeds and the chain's edits of them, whiteouts and overlay xattrs included
        _copy_base(base / "upper", top / "upper")
    # what is in the upper layer before any step: the chain wrote it only if it changed it afterwards
    setup = {str(p.relative_to(top / "upper")) for p in (top / "upper").rglob("*")} | set(USERADD_FILES)
    for step in steps:
        _write_step(io / "steps" / f"{step.number:03d}", step)
    for path in io.rglob("*"):
        if not path.is_symlink() and path.parent != state and path != state:
            path.chmod(path.stat().st_mode | stat.S_IROTH | stat.S_IRGRP | (stat.S_IXOTH | stat.S_IXGRP if path.is_dir() else 0))

    argv = ["unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--",
            "bash", str(STANDINS / "enter.sh"), str(top)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, text=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    setup_done = state / "setup-done"
    if not setup_done.exists() and not timed_out:
        raise RehearsalError(
            f"could not enter the rehearsal copy (exit {proc.returncode}): {_last(err) or _last(out) or 'no output'}")
    results = [_result(io / "steps" / f"{s.number:03d}", s) for s in steps]
    since = setup_done.stat().st_mtime_ns if setup_done.exists() else 0
    written, removed = _etc_changes(top / "upper", since, setup)
    return RawRun(
        results=results,
        calls=_table(state / "calls", 3),
        gaps=_table(state / "gaps", 2),
        errors=[_error(line) for line in _lines(state / "errors") if line.count("\t") >= 3],
        packages=_table(state / "packages", 2),
        units=_table(state / "units", 2),
        etc_written=written,
        etc_removed=removed,
        timed_out=timed_out,
        kept=top if keep else None,
        stood_in=_table(state / "stood_in", 2),
    )


def _copy_base(source: Path, upper: Path) -> None:
    """Copy a base's upper layer into a new one with ``cp -a``, which keeps the whiteouts (character
    devices) and the overlay's xattrs that shutil does not. (Not a second lower layer: the kernel
    refuses a lower layer inside another, and the base lies inside /.)"""
    done = subprocess.run(["cp", "-a", "--", f"{source}/.", f"{upper}/"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RehearsalError(f"could not copy the base {source} into the rehearsal copy: "
                             f"{_last(done.stderr) or f'cp exit {done.returncode}'}")


def amazon_linux_folders() -> tuple[str, ...]:
    """The folders of `FOLDERS_FILE`, as paths relative to / (checked: absolute, no '..')."""
    out = []
    for line in FOLDERS_FILE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith("/") or ".." in line.split("/"):
            raise RehearsalError(f"{FOLDERS_FILE}: {line!r} is not an absolute path")
        out.append(line.lstrip("/"))
    return tuple(out)


def _seed_upper(upper: Path, os_name: str) -> None:
    """Fit the copy to an Amazon Linux build instance before it is mounted."""
    # Amazon Linux's /bin/sh is bash; Packer's inline steps run under `#!/bin/sh -e`.
    sh = Path(os.path.realpath("/bin")) / "sh"  # through a merged /bin -> usr/bin, not to dash itself
    target = upper / sh.relative_to("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to("bash")
    # The copy says it is the variant's Amazon Linux: chains branch on /etc/os-release and
    # /etc/system-release (upstream's validate.sh does).
    for name, text in OS_RELEASE[os_name].items():
        (upper / name).parent.mkdir(parents=True, exist_ok=True)
        (upper / name).write_text(text)
    # Files of an Amazon Linux build instance that chains edit in place (abridged to what they edit),
    # where this machine has none, so the chain's edits to them are rehearsed too: the package manager's
    # configuration (2: yum.conf; 2023: dnf.conf, yum.conf a link to it) among them.
    conf = "etc/yum.conf" if os_name == "al2" else "etc/dnf/dnf.conf"
    package_conf = "[main]\ngpgcheck=1\ninstallonly_limit=3\nclean_requirements_on_remove=True\n"
    for name, text in {conf: package_conf, **AMAZON_LINUX_FILES}.items():
        if not os.path.lexists("/" + name):
            (upper / name).parent.mkdir(parents=True, exist_ok=True)
            (upper / name).write_text(text)
    # Folders every Amazon Linux has and chains write into without creating them first.
    for folder in amazon_linux_folders():
        if not os.path.isdir("/" + folder):
            (upper / folder).mkdir(parents=True, exist_ok=True)
    if os_name == "al2023" and not os.path.lexists("/etc/yum.conf"):
        (upper / "etc/yum.conf").symlink_to("dnf/dnf.conf")
    for path in STANDIN_PATHS:
        real = Path(os.path.realpath(os.path.dirname(path))) / os.path.basename(path)
        dest = upper / real.relative_to("/")
        if os.path.lexists(real) or os.path.lexists(dest):
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(f"/{IO}/bin/{real.name}")


def _write_step(folder: Path, step: Step) -> None:
    folder.mkdir()
    (folder / "kind").write_text(step.kind)
    uploads: list[str] = []
    if step.kind == "shell":
        payload = folder / "script"
        if step.inline:
            payload.write_text(f"#!{step.inline_shebang}\n" + "".join(f"{line}\n" for line in step.inline))
        else:
            shutil.copyfile(step.script, payload)
        uploads.append(f"script\t{step.remote_path}\tfile")
        (folder / "command").write_text(step.command)
        (folder / "scripts").write_text(step.remote_path)
        (folder / "valid").write_text(" ".join(str(c) for c in step.valid_exit_codes))
    elif step.kind == "file":
        for index, upload in enumerate(step.uploads):
            if upload.how == "download":
                uploads.append(f"-\t{upload.source}\tdownload")
                continue
            source = Path(upload.source)
            holder = folder / f"payload{index}"
            holder.mkdir()
            name = source.name or "upload"
            if source.is_dir():
                shutil.copytree(source, holder / name, symlinks=True)
            else:
                shutil.copy(source, holder / name)
            uploads.append(f"payload{index}/{name}\t{upload.destination}\t{upload.how}")
    if uploads:
        (folder / "uploads").write_text("".join(f"{line}\n" for line in uploads))


def _result(folder: Path, step: Step) -> RawResult:
    result = folder / "result"
    if not result.exists():
        return RawResult(step, ran=False)
    status, start, end = result.read_text().split()
    return RawResult(step, ran=True, exit_status=int(status), seconds=max(0.0, float(end) - float(start)),
                     stdout=_read(folder / "stdout"), stderr=_read(folder / "stderr"))


def _etc_changes(upper: Path, since_ns: int, setup: set[str]) -> tuple[list[str], list[str]]:
    """Files under /etc the chain wrote or removed: read from the overlay's upper layer.

    A file there that the set-up made (the seeds, the build user, a base's files) counts only if it
    changed after the set-up; any other file counts whatever its time (tar and cp -p keep old ones).
    """
    written, removed = [], []
    etc = upper / "etc"
    if not etc.is_dir():
        return written, removed
    for path in sorted(etc.rglob("*")):
        info = path.lstat()
        relative = str(path.relative_to(upper))
        if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
            if relative not in setup or info.st_mtime_ns >= since_ns:
                removed.append("/" + relative)  # an overlay whiteout: the chain deleted it (not its base)
        elif not stat.S_ISDIR(info.st_mode) and (relative not in setup or info.st_mtime_ns >= since_ns):
            written.append("/" + relative)
    return written, removed


def _error(line: str) -> tuple[str, int, int, str]:
    script, lineno, status, command = line.split("\t", 3)
    return script, int(lineno) if lineno.isdigit() else 0, int(status) if status.isdigit() else 0, command


def _table(path: Path, width: int) -> list:
    return [tuple((line.split("\t", width - 1) + [""] * width)[:width]) for line in _lines(path)]


def _lines(path: Path) -> list[str]:
    return [line for line in _read(path).splitlines() if line.strip()]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _last(text: str) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""
