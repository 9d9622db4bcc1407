"""The parent side: `Sandbox` starts, watches and stops the emulator child process
(``python -m amibuild.sandbox serve``); `serve_foreground` for `amibuild sandbox`; the safety env."""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, TextIO

from amibuild.sandbox import SandboxError
from amibuild.sandbox.standin_store import STORE_ENV
from amibuild.sandbox.seed import API_PREFIX, DEFAULT_REGION, LOOPBACK, PORT_LINE, PROXY_VARS, SEED_REGIONS, TRIPWIRE_PROXY, check_kind
from amibuild.sandbox.eks_cluster import sandbox_cluster


def safety_env() -> dict[str, str]:
    """Variables that keep any AWS client (boto3, packer) from leaving the machine."""
    env = {
        "AWS_EC2_METADATA_DISABLED": "true",
        "CHECKPOINT_DISABLE": "1",  # packer's version check would call hashicorp.com
    }
    for name in ("HTTPS_PROXY", "HTTP_PROXY"):
        env[name] = env[name.lower()] = TRIPWIRE_PROXY
    env["NO_PROXY"] = env["no_proxy"] = f"{LOOPBACK},localhost"
    return env



@dataclass(frozen=True)
class Release:
    """A newer EKS-optimized image the sandbox has just published."""

    image_id: str
    name: str
    parameter: str  # the recommended image_id parameter now pointing at it
    regions: tuple[str, ...]


class Sandbox:
    """A seeded moto server in a child process on 127.0.0.1.

    >>> with Sandbox() as sandbox:
    ...     boto3.client("ec2", endpoint_url=sandbox.endpoint, ...)
    """

    def __init__(self, port: int = 0, region: str = DEFAULT_REGION) -> None:
        self._requested_port = port
        self.region = region
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None  # the child's stderr, a temp file (a pipe could fill up and block it)
        # this sandbox's own files: the images' stand-ins (unless $AMIBUILD_SANDBOX_IMAGES names a
        # folder) and the kubeconfig of its cluster; removed by stop()
        self._state: Path | None = None
        self.images: Path | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> Sandbox:
        """Spawn the emulator and return once it answers; raise `SandboxError` if it does not (it starts in
        seconds; the minute is for a machine that is busy with other work)."""
        if self._proc is not None:
            raise SandboxError("this sandbox is already started; stop() it first")
        from amibuild.sandbox.moto_check import require_moto  # deferred: this module must load without moto

        require_moto()
        deadline = time.monotonic() + timeout
        self._log = tempfile.NamedTemporaryFile(prefix="amibuild-sandbox-", suffix=".log")
        self._state = Path(tempfile.mkdtemp(prefix="amibuild-sandbox-state-"))
        self.images = Path(os.environ.get(IMAGES_ENV) or self._state / "images")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "amibuild.sandbox", "serve", "--watch-stdin",
             "--port", str(self._requested_port)],
            stdin=subprocess.PIPE,  # the child exits when this closes, even if we are SIGKILLed
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**_child_env(), IMAGES_ENV: str(self.images)},
            # Ctrl-C in a terminal must reach us, not the child: we stop it in order.
            start_new_session=True,
        )
        atexit.register(self.stop)
        try:
            self.port = self._read_port(deadline)
            self._wait_ready(deadline)
            from amibuild.sandbox.kubeapi import kubeconfig  # deferred: only once the sandbox runs

            (self._state / "kubeconfig").write_text(kubeconfig(self.endpoint), encoding="utf-8")
        except _Refused as exc:
            self.stop()
            raise SandboxError(str(exc)) from None
        except SandboxError as exc:
            message = f"{exc}{self._stderr_tail()}"
            self.stop()
            raise SandboxError(message) from None
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Terminate the child and wait for it; safe to call twice."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._log is not None:
            self._log.close()  # a NamedTemporaryFile: closing deletes it
            self._log = None
        if self._state is not None:  # the stand-ins (when kept here) and the kubeconfig
            shutil.rmtree(self._state, ignore_errors=True)
            self._state = None

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the child exits (or `timeout`); its exit code, or None if still running."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.endpoint if self.running else "stopped"
        return f"Sandbox({state})"

    # -- what a client needs ------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise SandboxError("the sandbox is not started")
        return f"http://{LOOPBACK}:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment for boto3, packer and the CLI to use this sandbox; safety env included."""
        return {
            "AMIBUILD_TARGET": "sandbox",  # the CLI's choice of platform (amibuild/cli/target.py): said, not guessed
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            **safety_env(),
            IMAGES_ENV: str(self.images),
            "KUBECONFIG": str(self.kubeconfig),  # the sandbox cluster's API (`amibuild.sandbox.kubeapi`)
        }

    @property
    def kubeconfig(self) -> Path:
        if self._state is None:
            raise SandboxError("the sandbox is not started")
        return self._state / "kubeconfig"

    def nodes_ready(self, ready: bool, reason: str = "") -> None:
        """Make the sandbox cluster's nodes Ready (the default) or never Ready (until the next reset)."""
        self._post("k8s-nodes", {"ready": ready, "reason": reason})

    def deleted_nodes(self) -> list[dict[str, Any]]:
        """The sandbox cluster's Nodes deleted since the last reset, each as it was when deleted."""
        return self._post("k8s-nodes", {})["deleted"]

    # -- control endpoints --------------------------------------------------------------------

    def reset(self) -> list[str]:
        """Drop everything clients created and put the seed back; the regions that needed it
        (only those written to since the last reset: none when clients only read)."""
        return self._post("reset", {})["reset"]

    def clock(self) -> datetime:
        """The emulator's time: what its ``Date`` headers and SSM's timestamps say (`amibuild.sandbox.clock`)."""
        return datetime.fromisoformat(self._request("GET", "clock", None, timeout=10)["now"])

    def advance_clock(self, seconds: float = 0.0, *, to: datetime | None = None) -> datetime:
        """Move the emulator's clock forward by ``seconds`` (or ``to`` a time), until the next reset; the time then."""
        body: dict[str, Any] = {"set": to.isoformat()} if to is not None else {"advance": seconds}
        return datetime.fromisoformat(self._post("clock", body)["now"])

    def seed_fleet(self, seed: Any, region: str | None = None) -> Any:
        """Make the stacks, node groups, launch templates and instances of a `sandbox.fleet.FleetSeed`."""
        from amibuild.sandbox.fleet_seed import seed_fleet  # deferred: the fleet seeder only when one is asked for

        return seed_fleet(self.endpoint, region or self.region, seed)

    def cluster(self, region: str | None = None) -> dict[str, Any]:
        """The seeded EKS cluster: its name, VPC, subnets and control plane security group."""
        return sandbox_cluster(self.endpoint, region or self.region)

    def release(
        self,
        k8s: str,
        os: str = "al2",  # noqa: A002 - the brief's and AWS's word; the module is not used here
        arch: str = "x86_64",
        release: str | None = None,
    ) -> Release:
        """Publish a newer EKS-optimized image, as AWS does, and point its SSM parameters at it.

        `release` is the ``YYYYMMDD`` suffix; by default two weeks after the newest one known.
        The image is registered in every region of `SEED_REGIONS`; `reset()` takes it away.
        """
        check_kind(os, arch)
        body = self._post("release", {"k8s": k8s, "os": os, "arch": arch, "release": release})
        return Release(body["image_id"], body["name"], body["parameter"], tuple(body["regions"]))

    # -- internals ----------------------------------------------------------------------------

    def _read_port(self, deadline: float) -> int:
        """Read the child's first stdout line: the port it bound (binding port 0 avoids races)."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                match = PORT_LINE.search(buffer)
                if match:
                    return int(match.group(1))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SandboxError("the emulator did not report its port in time")
                if selector.select(remaining):
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        code = self._proc.wait()
                        if code == EXIT_REFUSED:  # the child said why in one line: that is the error
                            raise _Refused(self._stderr_tail(1).rsplit("\n", 1)[-1].removeprefix(CHILD_PREFIX))
                        raise SandboxError(f"the emulator exited (code {code}) before serving")
                    buffer += chunk

    def _wait_ready(self, deadline: float) -> None:
        while True:
            try:
                self._request("GET", "health", None, timeout=2)
                return
            except SandboxError:
                if time.monotonic() > deadline or not self.running:
                    raise
                time.sleep(0.05)

    def _post(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        if not self.running:
            raise SandboxError("the sandbox is not running")
        return self._request("POST", action, payload, timeout=30)

    def _request(
        self, method: str, action: str, payload: dict[str, Any] | None, timeout: float
    ) -> dict[str, Any]:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            f"{self.endpoint}{API_PREFIX}/{action}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with _NO_PROXY_OPENER.open(request, timeout=timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            with exc:  # an HTTPError is also the open response
                detail = exc.read().decode(errors="replace")
            try:
                detail = json.loads(detail)["error"]
            except (ValueError, KeyError, TypeError):
                pass
            raise SandboxError(f"sandbox {action} failed: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise SandboxError(f"sandbox {action} failed: {exc}") from exc

    def _stderr_tail(self, lines: int = 20) -> str:
        if self._log is None:
            return ""
        try:
            text = Path(self._log.name).read_text(errors="replace")
        except OSError:
            return ""
        tail = "\n".join(text.strip().splitlines()[-lines:])
        return f"\n--- emulator stderr (last {lines} lines) ---\n{tail}" if tail else ""


IMAGES_ENV = STORE_ENV  # where the sandbox keeps its images' stand-ins

# The child refuses to start with this code and one `CHILD_PREFIX` line on stderr saying why.
EXIT_REFUSED = 3
CHILD_PREFIX = "amibuild sandbox: "


class _Refused(SandboxError):
    """The child refused to start and said why."""


# The tripwire proxy in os.environ must not catch our own loopback calls.
_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _child_env() -> dict[str, str]:
    """The parent's environment without AWS, proxy or moto settings, plus the safety env."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "MOTO_"))
        and key.upper() not in PROXY_VARS
    }
    env.update(safety_env())
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=DEFAULT_REGION,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    # The child runs `-m amibuild.sandbox`: make this very package importable, installed or not.
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


# What the proxy lines above it do to the rest of that shell, said where they are pasted.
TRIPWIRE_NOTE = (
    f"# note: HTTPS_PROXY / HTTP_PROXY (and lower case) are a tripwire, {TRIPWIRE_PROXY}, where nothing listens: "
    "whatever would leave this machine fails at once instead. In this shell that breaks pip, git, curl and "
    "anything else that goes to the internet: use another shell for those, or undo it with\n"
    "#   unset HTTPS_PROXY HTTP_PROXY https_proxy http_proxy NO_PROXY no_proxy")


def serve_foreground(port: int = 0, out: TextIO | None = None) -> None:
    """Run a sandbox until Ctrl-C or SIGTERM, printing shell ``export`` lines for a client."""
    out = out if out is not None else sys.stdout
    sandbox = Sandbox(port=port).start()
    restore = _sigterm_raises_keyboard_interrupt()
    try:
        print("unset AWS_PROFILE AWS_SESSION_TOKEN AWS_SECURITY_TOKEN", file=out)
        for name, value in sandbox.env().items():
            print(f"export {name}={shlex.quote(value)}", file=out)
        cluster = sandbox.cluster()
        for name, value in (("AMIBUILD_SANDBOX_CLUSTER", cluster["cluster"]),
                            ("AMIBUILD_SANDBOX_VPC_ID", cluster["vpc"]),
                            ("AMIBUILD_SANDBOX_SUBNETS", ",".join(cluster["subnets"])),
                            ("AMIBUILD_SANDBOX_CONTROL_PLANE_SG", cluster["control_plane_sg"])):
            print(f"export {name}={shlex.quote(value)}", file=out)
        print(TRIPWIRE_NOTE, file=out)
        print(f"# seeded regions: {' '.join(SEED_REGIONS)}", file=out)
        print("# e.g. amibuild nodegroup-deploy --stack nodes --cluster ${AMIBUILD_SANDBOX_CLUSTER} "
              "--vpc-id ${AMIBUILD_SANDBOX_VPC_ID} --subnet ${AMIBUILD_SANDBOX_SUBNETS} "
              "--control-plane-sg ${AMIBUILD_SANDBOX_CONTROL_PLANE_SG} --variant V", file=out)
        print(f"# sandbox ready at {sandbox.endpoint} - Ctrl-C to stop", file=out, flush=True)
        code = sandbox.wait()
        raise SandboxError(f"the emulator exited on its own (code {code}){sandbox._stderr_tail()}")
    except KeyboardInterrupt:
        pass
    finally:
        sandbox.stop()
        restore()


def _sigterm_raises_keyboard_interrupt() -> Callable[[], None]:
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, previous)
