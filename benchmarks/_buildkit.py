"""What the build-ami benchmarks share: the emulator's environment, a logging packer wrapper,
generated pipeline files, and one `invoke build-ami` run as a subprocess.

Not a benchmark (the leading underscore keeps `run.py` from listing it). Everything here talks to
127.0.0.1 only: the child environment is the sandbox's `env()` (dummy credentials, metadata off,
a tripwire proxy for anything not on loopback) with no AWS settings or config files from the
machine, exactly as tests/conftest.py isolates the suite.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from benchmarks.common import BenchmarkError

ROOT = Path(__file__).resolve().parent.parent
_PROXY_VARS = {"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY"}

# Kinds the sandbox seeds (amibuild.sandbox.KUBERNETES_VERSIONS): al2 1.28-1.32, al2023 1.28-1.33.
_KINDS = [("al2", k) for k in ("1.28", "1.29", "1.30", "1.31", "1.32")] + \
         [("al2023", k) for k in ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33")]
_PACKAGES = ("htop", "jq", "ceph-common", "nfs-utils", "lvm2", "tmux", "strace")


def packer_binary() -> str:
    found = shutil.which("packer")
    if found is None:
        raise BenchmarkError("packer is not on PATH: the build-ami benchmarks run the real packer")
    return found


def packer_version(env: Mapping[str, str]) -> str:
    """`packer version`'s first line, e.g. "Packer v1.6.6" (checkpoint is off in ``env``)."""
    proc = subprocess.run([packer_binary(), "version"], env=dict(env), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=30)
    return (proc.stdout.strip().splitlines() or ["packer (version unknown)"])[0]


def byte_compile() -> None:
    """Byte-compile amibuild, as pip leaves an install. With PYTHONDONTWRITEBYTECODE set (or .pyc
    files older than an edit: `python -m invoke` never rewrites them) every timed run would
    compile the edited modules again, ~0.1-0.3 s that no installed amibuild pays."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "amibuild")], check=True,
                   stdout=subprocess.DEVNULL)


def child_env(sandbox_env: Mapping[str, str], *, endpoint: str | None = None,
              wrapper: Path | None = None) -> dict[str, str]:
    """This process's environment minus AWS / proxy / amibuild settings, plus the sandbox's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "INVOKE_AMIBUILD_")) and k.upper() not in _PROXY_VARS}
    env.update(sandbox_env)
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    if endpoint is not None:
        env["AWS_ENDPOINT_URL"] = endpoint
    if wrapper is not None:
        env["INVOKE_AMIBUILD_PACKER"] = str(wrapper)
    return env


def write_wrapper(folder: Path, *, build_delay: float = 0.0) -> tuple[Path, Path]:
    """A packer wrapper that logs every call (subcommand, variant folder, epoch time) and, for
    `packer build` only, sleeps ``build_delay`` seconds first; then execs the real packer."""
    log = folder / "packer-calls"
    wrapper = folder / "packer-wrapper"
    sleep = f'if [ "$1" = build ]; then sleep {build_delay:g}; fi\n' if build_delay else ""
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo "$1 $(basename "$PWD") $(date +%s.%N)" >> "{log}"\n'
        f"{sleep}"
        f'exec "{packer_binary()}" "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return wrapper, log


@dataclass(frozen=True)
class PackerCall:
    subcommand: str
    folder: str
    at: float  # epoch seconds


def packer_calls(log: Path) -> list[PackerCall]:
    if not log.exists():
        return []
    calls = []
    for line in log.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 3:
            calls.append(PackerCall(parts[0], parts[1], float(parts[2])))
    return calls


def pipeline_text(count: int, *, regions: Sequence[str] = ("us-west-2",), copy_to: Sequence[str] = (),
                  name: str = "bench") -> str:
    """``count`` distinct variants across OS, architecture, Kubernetes version and extra packages."""
    from amibuild import hcl

    pipeline = hcl.Block("pipeline").attr("name", name).attr("regions", list(regions))
    if copy_to:
        pipeline.attr("copy_to", list(copy_to))
    body: list = [pipeline]
    for i in range(count):
        os_, k8s = _KINDS[i % len(_KINDS)]
        arch = "arm64" if (i // len(_KINDS)) % 2 else "x86_64"
        variant = hcl.Block("variant", (f"v{i:02d}-{os_}-{'arm' if arch == 'arm64' else 'x86'}-k{k8s[2:]}",))
        variant.attr("os", os_).attr("arch", arch).attr("kubernetes_version", k8s)
        packages = [_PACKAGES[(i + j) % len(_PACKAGES)] for j in range(i % 3)]
        if packages:
            variant.attr("extra_packages", packages)
        body.append(variant)
    return hcl.dumps(body, header=f"{count} variants generated by benchmarks/_buildkit.py")


@dataclass(frozen=True)
class BuildResult:
    seconds: float  # wall time of the whole `invoke build-ami` subprocess
    started: float  # epoch seconds when it was started
    document: dict
    stderr: str

    @property
    def variants(self) -> list[dict]:
        return self.document.get("variants", [])

    def statuses(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.variants:
            out[v["status"]] = out.get(v["status"], 0) + 1
        return out


def build_ami_argv(*args: str) -> list[str]:
    """The argv of `python -m invoke -r ROOT build-ami ARGS`."""
    return [sys.executable, "-m", "invoke", "-r", str(ROOT), "build-ami", *args]


def build_ami(workdir: Path, env: Mapping[str, str], *args: str, timeout: float = 300) -> BuildResult:
    """`python -m invoke -r ROOT build-ami --json ARGS` in ``workdir``; fails loudly unless exit 0."""
    argv = build_ami_argv("--json", *args)
    started = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=workdir, env=dict(env), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise BenchmarkError(f"`build-ami --json {' '.join(args)}` exited {proc.returncode}:\n{tail}")
    try:
        document = json.loads(proc.stdout)
    except ValueError as exc:
        raise BenchmarkError(f"build-ami --json printed no JSON ({exc}): {proc.stdout[:300]!r}") from exc
    return BuildResult(seconds, started, document, proc.stderr)


def expect(result: BuildResult, status: str, count: int, what: str) -> None:
    """Every one of ``count`` variants has ``status``, or the benchmark stops: no figure beats a wrong one."""
    statuses = result.statuses()
    if statuses != {status: count}:
        bad = [f"{v['name']}: {v['status']} {v.get('error', '')}".strip()
               for v in result.variants if v["status"] != status][:3]
        raise BenchmarkError(f"{what}: expected {count} {status}, got {statuses}; " + "; ".join(bad))


def fault_proxy_class() -> type:
    """tests/faultproxy.py's `FaultProxy` (a counting forwarder on 127.0.0.1), loaded by path, with
    TCP_NODELAY on the connections it accepts.

    Its handler writes a reply's headers and body in two sends; with Nagle's algorithm on, the body
    waits for the client's delayed ACK, about 40 ms per request on Linux, which would land on every
    AWS call these benchmarks time. Newer versions of faultproxy.py switch Nagle off themselves; the
    subclass makes sure of it (socketserver's `disable_nagle_algorithm`, set once the server exists).
    """
    path = ROOT / "tests" / "faultproxy.py"
    if not path.exists():
        raise BenchmarkError(f"{path} is missing: the AWS call count needs its FaultProxy")
    name = "_amibuild_bench_faultproxy"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
    base = module.FaultProxy

    class NoDelayFaultProxy(base):
        def start(self):  # type: ignore[override]
            super().start()
            self._server.RequestHandlerClass.disable_nagle_algorithm = True  # before any client knows the port
            return self

    return NoDelayFaultProxy


@contextlib.contextmanager
def environ(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` replaced by ``env`` for the block (for in-process boto3 against the sandbox)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
