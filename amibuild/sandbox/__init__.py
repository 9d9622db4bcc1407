"""Local AWS emulator for the demo, `invoke sandbox` and the test-suite.

`Sandbox` runs moto's server in a child process (``python -m amibuild.sandbox serve``) bound to
127.0.0.1 on a free port, seeded with what amibuild expects to find in a real account:

* EKS-optimized base images (owner 602401143452, AL2 and AL2023, x86_64 and arm64, two releases
  per Kubernetes version) in every region, through ``MOTO_AMIS_PATH``, with the accelerated
  flavors AWS publishes (`FLAVOR_SEEDS`: AL2023 nvidia and neuron, AL2 gpu);
* the public ``/aws/service/eks/optimized-ami/...`` SSM parameters pointing at the newest of them,
  in every region of `SEED_REGIONS` (the emulator refuses to create ``/aws/`` names over the API,
  so the child writes them straight into its SSM backend);
* a VPC named ``amibuild-sandbox`` with two subnets in every region of `SEED_REGIONS`;
* an EKS cluster named ``amibuild-sandbox`` in that VPC, with a control plane security group,
  public and private endpoint access and authentication mode API_AND_CONFIG_MAP
  (`amibuild.sandbox.cluster`; what `invoke sandbox` prints for `invoke nodegroup-deploy`);
* for the upstream base: Amazon Linux minimal source images and the ``amazon-eks`` binaries bucket
  (`amibuild.sandbox.upstream`).

Beyond the stack update model (`_model_stack_updates`), the child closes two more gaps, in
`amibuild.sandbox.cluster`: CloudFormation reads YAML templates with amibuild's short-form loader,
so AWS's own amazon-eks-nodegroup.yaml (``!Base64`` over ``!Sub``) creates as users have it, and
EKS clusters carry a CA that is base64 of a PEM block and the ``accessConfig`` they were created with.

The child wraps moto's WSGI app in a small middleware with its own endpoints::

    GET  /amibuild-sandbox/health    {"regions": [...]}: answers once the seed is in place
    POST /amibuild-sandbox/reset     reset every moto backend, then seed again (in-process)
    POST /amibuild-sandbox/release   {"k8s", "os", "arch", ["release"]}: publish a newer image
    POST /moto-api/reset             same as /amibuild-sandbox/reset, so the seed survives it

Everything else is moto. The child never talks to anything but loopback: it gets dummy
credentials, no AWS config files, metadata disabled and a tripwire proxy (`safety_env`).

This module is imported by the parent side without importing moto: the child must set
``MOTO_AMIS_PATH`` before moto is imported, and `invoke --list` stays fast.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from amibuild.errors import AmibuildError, SandboxError
from amibuild.sandbox.images import moto_ami
from amibuild.sandbox.cluster import SANDBOX_CLUSTER as SANDBOX_CLUSTER  # the seeded cluster's name, public
from amibuild.sandbox.cluster import create_cluster, model_eks_clusters, read_short_form_yaml, sandbox_cluster
from amibuild.sandbox import runcommand

SEED_REGIONS: tuple[str, ...] = (
    "us-west-2",
    "us-east-1",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-2",
)
DEFAULT_REGION = "us-west-2"
ACCOUNT_ID = "123456789012"  # moto's default account: what the dummy credentials map to
EKS_AMI_OWNER = "602401143452"
OS_FAMILIES = ("al2", "al2023")
ARCHITECTURES = ("x86_64", "arm64")
# AWS published AL2 images up to Kubernetes 1.32 (1.22 is the default of AWS's own node group
# template), and AL2023 ones from 1.28 on.
KUBERNETES_VERSIONS = {
    "al2": tuple(f"1.{minor}" for minor in range(22, 33)),
    "al2023": tuple(f"1.{minor}" for minor in range(28, 36)),
}
# Accelerated parents per OS, with the architectures AWS publishes each for (standard: both).
FLAVOR_SEEDS = {
    "al2023": {"nvidia": ("x86_64", "arm64"), "neuron": ("x86_64",)},
    "al2": {"gpu": ("x86_64",)},
}
SEED_RELEASES = ("20231201", "20240101")  # the last one is "recommended"
RELEASE_STEP = timedelta(days=14)  # how much newer `release()` makes the next image by default
SANDBOX_VPC_NAME = "amibuild-sandbox"
SANDBOX_VPC_CIDR = "10.42.0.0/16"
SANDBOX_SUBNETS = (("a", "10.42.0.0/24"), ("b", "10.42.1.0/24"))
TRIPWIRE_PROXY = "http://127.0.0.1:9"  # discard port: a stray non-loopback call fails at once
LOOPBACK = "127.0.0.1"
API_PREFIX = "/amibuild-sandbox"
_PORT_LINE = re.compile(rb"^AMIBUILD_SANDBOX_PORT=(\d+)$", re.MULTILINE)
_PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY")
_K8S_VERSION = re.compile(r"^\d+\.\d+$")
_RELEASE_DATE = re.compile(r"^\d{8}$")


# --------------------------------------------------------------------------------------------
# What gets seeded: pure data, shared by both processes.


@dataclass(frozen=True)
class EksImage:
    """One EKS-optimized base image as AWS publishes it."""

    k8s: str
    os: str  # "al2" | "al2023"
    arch: str  # "x86_64" | "arm64"
    release: str  # YYYYMMDD, as in the name's -vYYYYMMDD suffix
    flavor: str = "standard"  # or an accelerated one of `FLAVOR_SEEDS`

    @property
    def name(self) -> str:
        if self.os == "al2":
            if self.flavor == "gpu":
                return f"amazon-eks-gpu-node-{self.k8s}-v{self.release}"
            kind = "node" if self.arch == "x86_64" else "arm64-node"
            return f"amazon-eks-{kind}-{self.k8s}-v{self.release}"
        return f"amazon-eks-node-al2023-{self.arch}-{self.flavor}-{self.k8s}-v{self.release}"

    @property
    def image_id(self) -> str:
        # Deterministic and shaped like a real id, so logs and fixtures stay stable across runs.
        return "ami-" + hashlib.sha256(self.name.encode()).hexdigest()[:17]

    @property
    def creation_date(self) -> str:
        r = self.release
        return f"{r[:4]}-{r[4:6]}-{r[6:]}T00:00:00.000Z"

    @property
    def parameter_prefix(self) -> str:
        return recommended_prefix(self.k8s, self.os, self.arch, self.flavor)

    def to_moto(self) -> dict[str, Any]:
        """The entry for a ``MOTO_AMIS_PATH`` file (keyword arguments of moto's ``Ami``)."""
        base = "Amazon Linux 2" if self.os == "al2" else "Amazon Linux 2023"
        return moto_ami(self.image_id, self.name, owner=EKS_AMI_OWNER, arch=self.arch, creation_date=self.creation_date,
                        description=f"EKS Kubernetes Worker AMI with {base} image (k8s: {self.k8s})")


def _check_kind(os_family: str, arch: str) -> None:
    if os_family not in OS_FAMILIES:
        raise SandboxError(f"unknown os {os_family!r}: use one of {', '.join(OS_FAMILIES)}")
    if arch not in ARCHITECTURES:
        raise SandboxError(f"unknown arch {arch!r}: use one of {', '.join(ARCHITECTURES)}")


def recommended_prefix(k8s: str, os: str, arch: str, flavor: str = "standard") -> str:  # noqa: A002
    """``/aws/service/eks/optimized-ami/<k8s>/<os path>/recommended`` for one image kind."""
    _check_kind(os, arch)
    if flavor != "standard" and arch not in FLAVOR_SEEDS[os].get(flavor, ()):
        raise SandboxError(f"no {os} {flavor} image for {arch}: flavors are "
                           f"{', '.join(['standard', *FLAVOR_SEEDS[os]])}")
    if os == "al2":
        path = "amazon-linux-2-gpu" if flavor == "gpu" else (
            "amazon-linux-2" if arch == "x86_64" else "amazon-linux-2-arm64")
    else:
        path = f"amazon-linux-2023/{arch}/{flavor}"
    return f"/aws/service/eks/optimized-ami/{k8s}/{path}/recommended"


def recommended_parameter(k8s: str, os: str, arch: str, flavor: str = "standard") -> str:  # noqa: A002
    """The public SSM parameter holding the recommended image id for one image kind."""
    return recommended_prefix(k8s, os, arch, flavor) + "/image_id"


def seed_images() -> list[EksImage]:
    """Every base image the sandbox starts with (same ids in every region)."""
    return [
        EksImage(k8s, os_family, arch, release, flavor)
        for os_family in OS_FAMILIES
        for k8s in KUBERNETES_VERSIONS[os_family]
        for flavor, arches in (("standard", ARCHITECTURES), *FLAVOR_SEEDS[os_family].items())
        for arch in arches
        for release in SEED_RELEASES
    ]


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


# --------------------------------------------------------------------------------------------
# Parent side.


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

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> Sandbox:
        """Spawn the emulator and return once it answers; raise `SandboxError` if it does not."""
        if self._proc is not None:
            raise SandboxError("this sandbox is already started; stop() it first")
        from amibuild.sandbox.moto_check import require_moto

        require_moto()
        deadline = time.monotonic() + timeout
        self._log = tempfile.NamedTemporaryFile(prefix="amibuild-sandbox-", suffix=".log")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "amibuild.sandbox", "serve", "--watch-stdin",
             "--port", str(self._requested_port)],
            stdin=subprocess.PIPE,  # the child exits when this closes, even if we are SIGKILLed
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=_child_env(),
            # Ctrl-C in a terminal must reach us, not the child: we stop it in order.
            start_new_session=True,
        )
        atexit.register(self.stop)
        try:
            self.port = self._read_port(deadline)
            self._wait_ready(deadline)
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
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            **safety_env(),
        }

    # -- control endpoints --------------------------------------------------------------------

    def reset(self) -> None:
        """Drop everything clients created and put the seed back."""
        self._post("reset", {})

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
        _check_kind(os, arch)
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
                match = _PORT_LINE.search(buffer)
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
        and key.upper() not in _PROXY_VARS
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
        print(f"# seeded regions: {' '.join(SEED_REGIONS)}", file=out)
        print("# e.g. invoke nodegroup-deploy --stack nodes --cluster ${AMIBUILD_SANDBOX_CLUSTER} "
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


# --------------------------------------------------------------------------------------------
# Child side: everything below runs in the emulator process only.


class _Seeder:
    """Seeds the in-process moto backends, and publishes newer images on request."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.released: list[EksImage] = []

    def seed(self) -> None:
        from moto.ec2.models import ec2_backends
        from moto.ssm.models import ssm_backends
        from amibuild.sandbox import upstream

        self.released = []
        newest: dict[tuple[str, str, str, str], EksImage] = {}
        for image in seed_images():
            key = (image.k8s, image.os, image.arch, image.flavor)
            if key not in newest or image.release > newest[key].release:
                newest[key] = image
        for region in SEED_REGIONS:
            ssm = ssm_backends[ACCOUNT_ID][region]
            for image in newest.values():
                _point_parameters(ssm, image)
            _create_vpc(ec2_backends[ACCOUNT_ID][region], region)
            create_cluster(ec2_backends[ACCOUNT_ID][region], region, account=ACCOUNT_ID, vpc_cidr=SANDBOX_VPC_CIDR)
        upstream.seed(SEED_REGIONS, ACCOUNT_ID, {k for versions in KUBERNETES_VERSIONS.values() for k in versions})

    def release(self, k8s: str, os_family: str, arch: str, release: str | None) -> EksImage:
        from moto.core.parse import default_timestamp_parser
        from moto.ec2.models import ec2_backends
        from moto.ec2.models.amis import Ami
        from moto.ssm.models import ssm_backends

        _check_kind(os_family, arch)
        if not _K8S_VERSION.match(k8s):
            raise SandboxError(f"kubernetes version {k8s!r} is not like 1.30")
        known = [i.release for i in seed_images() + self.released
                 if (i.k8s, i.os, i.arch) == (k8s, os_family, arch)] or list(SEED_RELEASES)
        newest = max(known)
        if release is None:
            day = date(int(newest[:4]), int(newest[4:6]), int(newest[6:])) + RELEASE_STEP
            release = day.strftime("%Y%m%d")
        elif not _RELEASE_DATE.match(release) or release <= newest:
            raise SandboxError(f"release {release!r} must be YYYYMMDD and newer than {newest}")
        image = EksImage(k8s, os_family, arch, release)
        for region in SEED_REGIONS:
            ec2 = ec2_backends[ACCOUNT_ID][region]
            fields = image.to_moto()
            fields["creation_date"] = default_timestamp_parser(fields["creation_date"])
            ami = Ami(ec2, owner_alias="amazon", **fields)
            ec2.amis[ami.id] = ami
            _point_parameters(ssm_backends[ACCOUNT_ID][region], image)
        self.released.append(image)
        return image


def _point_parameters(ssm: Any, image: EksImage) -> None:
    """Add a version of the image's public parameters (``image_id``, ``image_name``)."""
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter

    for leaf, value in (("image_id", image.image_id), ("image_name", image.name)):
        name = f"{image.parameter_prefix}/{leaf}"
        # put_parameter refuses /aws/ names (as AWS does), so write into the backend's store.
        versions = ssm._parameters[name]
        versions.append(
            Parameter(
                account_id=ACCOUNT_ID,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=versions[-1].version + 1 if versions else 1,
                data_type="text",
                tier="Standard",
            )
        )


def _create_vpc(ec2: Any, region: str) -> None:
    name_tag = [{"Key": "Name", "Value": SANDBOX_VPC_NAME}]
    vpc = ec2.create_vpc(cidr_block=SANDBOX_VPC_CIDR, tags=name_tag)
    for zone, cidr in SANDBOX_SUBNETS:
        subnet = ec2.create_subnet(vpc_id=vpc.id, cidr_block=cidr, availability_zone=region + zone)
        ec2.create_tags([subnet.id], {"Name": f"{SANDBOX_VPC_NAME}-{zone}"})


_StartResponse = Callable[..., Any]


class _SandboxApp:
    """WSGI middleware: our control endpoints, everything else to moto."""

    def __init__(self, moto_app: Any, seeder: _Seeder) -> None:
        self.moto_app = moto_app
        self.seeder = seeder

    def __call__(self, environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
        if (method, path) in (("POST", f"{API_PREFIX}/reset"), ("POST", "/moto-api/reset")):
            return self._answer(start_response, self._reset)
        if (method, path) == ("POST", f"{API_PREFIX}/release"):
            return self._answer(start_response, lambda: self._release(environ))
        if (method, path) == ("GET", f"{API_PREFIX}/health"):
            return self._answer(start_response, lambda: {"regions": list(SEED_REGIONS)})
        if path.startswith(f"{API_PREFIX}/"):
            error = {"error": f"no route {method} {path}"}
            return self._json(start_response, "404 Not Found", error)
        return self.moto_app(environ, start_response)

    def _reset(self) -> dict[str, Any]:
        from moto.moto_api._internal.models import moto_api_backend

        with self.seeder.lock:
            moto_api_backend.reset()
            self.seeder.seed()
        return {"status": "ok"}

    def _release(self, environ: dict[str, Any]) -> dict[str, Any]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            body = json.loads(environ["wsgi.input"].read(length) or b"{}")
            args = (str(body["k8s"]), str(body.get("os", "al2")), str(body.get("arch", "x86_64")))
        except (ValueError, KeyError, TypeError) as exc:
            raise SandboxError(f"release wants JSON with k8s, os, arch: {exc}") from exc
        with self.seeder.lock:
            image = self.seeder.release(*args, body.get("release"))
        return {
            "image_id": image.image_id,
            "name": image.name,
            "parameter": f"{image.parameter_prefix}/image_id",
            "regions": list(SEED_REGIONS),
        }

    def _answer(
        self, start_response: _StartResponse, action: Callable[[], dict[str, Any]]
    ) -> Iterable[bytes]:
        try:
            return self._json(start_response, "200 OK", action())
        except SandboxError as exc:
            return self._json(start_response, "400 Bad Request", {"error": str(exc)})

    @staticmethod
    def _json(start_response: _StartResponse, status: str, body: dict[str, Any]) -> Iterable[bytes]:
        data = json.dumps(body).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        start_response(status, headers)
        return [data]


def _model_stack_updates() -> None:
    """Make moto's CloudFormation stack updates behave as AWS's where amibuild's rollout needs it.

    moto 5.2.5 keeps a stack's parameters only as resolved values: DescribeStacks shows an SSM
    parameter's value instead of its name (and no ResolvedValue), UsePreviousValue hands the
    resolved value back (a List<...> then fails with HTTP 500, an SSM name becomes an AMI id), and
    a parameter left at its Default counts as changed on every update. And an Auto Scaling group
    keeps its launch template version when the template's ``!GetAtt LatestVersionNumber`` moves.
    Here the previous value is the one passed (else the Default, unresolved), DescribeStacks shows
    it with ResolvedValue, and after an update each group follows its LaunchTemplate property.
    And as on AWS, which resolves SSM parameter values again on every update, an update whose
    template and parameters are unchanged still goes ahead when an SSM-typed parameter's value moved
    (moto answered "No updates are to be performed"). Instances are still not replaced.
    """
    from moto.cloudformation.models import Stack
    from moto.cloudformation.parsing import ResourceMap, clean_json, get_references_from_template
    from moto.cloudformation.responses import CloudFormationResponse
    from moto.ssm.models import ssm_backends

    def previous(resource_map: Any) -> dict[str, Any]:
        slots = resource_map._template.get("Parameters", {})
        values = {key: str(slot["Default"]) for key, slot in slots.items() if "Default" in slot}
        values.update(resource_map.input_parameters or {})
        return values

    def parameter_list(stack: Any) -> list[dict[str, Any]]:
        slots = stack.resource_map._template.get("Parameters", {})
        hidden = stack.resource_map.no_echo_parameter_keys
        out = []
        for key, value in previous(stack.resource_map).items():
            entry = {"ParameterKey": key, "ParameterValue": "****" if key in hidden else value}
            if slots.get(key, {}).get("Type", "").startswith("AWS::SSM::Parameter::Value<"):
                resolved = stack.resource_map.resolved_parameters.get(key)
                entry["ResolvedValue"] = ",".join(resolved) if isinstance(resolved, list) else str(resolved)
            out.append(entry)
        return out

    original_update = ResourceMap.update

    def update(resource_map: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
        resource_map.input_parameters = previous(resource_map)  # a Default left alone is no change
        original_update(resource_map, template, parameters)
        for logical_id, resource in resource_map._resource_json_map.items():
            spec = resource.get("Properties", {}).get("LaunchTemplate")
            if resource.get("Type") == "AWS::AutoScaling::AutoScalingGroup" and spec:
                resource_map[logical_id]._set_launch_configuration(None, clean_json(spec, resource_map), None)

    def moved_ssm_parameters(resource_map: Any) -> set[str]:
        """Stack parameters of SSM type whose parameter's value moved since the stack resolved it."""
        slots = resource_map._template.get("Parameters", {})
        backend = ssm_backends[resource_map._account_id][resource_map._region_name]
        moved = set()
        for key, name in previous(resource_map).items():
            if slots.get(key, {}).get("Type", "").startswith("AWS::SSM::Parameter::Value<"):
                parameter = backend.get_parameter(name)
                if parameter is not None and parameter.value != resource_map.resolved_parameters.get(key):
                    moved.add(key)
        return moved

    original_validate = CloudFormationResponse._validate_different_update

    def validate_different_update(self: Any, incoming: Any, body: str, old_stack: Any) -> None:
        if not moved_ssm_parameters(old_stack.resource_map):
            original_validate(self, incoming, body, old_stack)

    original_diff = ResourceMap.build_resource_diff

    def build_resource_diff(resource_map: Any, template: dict[str, Any], parameters: Any = None) -> dict[str, Any]:
        actions = original_diff(resource_map, template, parameters)
        moved = moved_ssm_parameters(resource_map)
        for name, resource in template.get("Resources", {}).items():
            if (name in resource_map._resource_json_map and name not in actions["Modify"]
                    and moved & set(get_references_from_template(resource))):
                actions["Modify"].append(name)
        return actions

    ResourceMap.build_resource_diff = build_resource_diff
    CloudFormationResponse._validate_different_update = validate_different_update
    Stack.stack_parameters = property(lambda stack: previous(stack.resource_map))
    Stack.parameter_list = property(parameter_list)
    ResourceMap.update = update


def _serve(host: str, port: int, watch_stdin: bool) -> None:
    """The child process: seed moto, bind, report the port on stdout, serve until told to stop."""
    with tempfile.TemporaryDirectory(prefix="amibuild-sandbox-") as scratch:
        amis_path = Path(scratch, "amis.json")
        amis_path.write_text(json.dumps([image.to_moto() for image in seed_images()]))
        # moto reads the file when its EC2 models are imported, and only checks the variable after.
        os.environ["MOTO_AMIS_PATH"] = str(amis_path)
        from amibuild.sandbox.moto_check import check_internals

        # imports moto.ec2.models (reading the file) and every other moto module used here; a moto
        # that moved what we patch or import fails now, naming it
        check_internals()
    _model_stack_updates()
    runcommand.install()  # the SSM agent of boot-test instances
    model_eks_clusters()
    read_short_form_yaml()

    import logging

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request in the log
    seeder = _Seeder()
    app = _SandboxApp(DomainDispatcherApplication(create_backend_app), seeder)
    # Bind first (a taken port fails fast), seed, then report the port: nobody knows it before.
    server = make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)
    seeder.seed()

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if watch_stdin:
        stdin_fd = sys.stdin.fileno()

        def watch() -> None:
            # Raw reads: a daemon thread blocked inside sys.stdin's buffered reader makes the
            # interpreter abort at shutdown ("could not acquire lock for <stdin>").
            while os.read(stdin_fd, 4096):
                pass  # EOF: the parent closed the pipe or died
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()

    sys.stdout.write(f"AMIBUILD_SANDBOX_PORT={server.server_port}\n")
    sys.stdout.flush()
    # The parent stops reading stdout now: send anything printed later to the stderr log.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        server.serve_forever()
    except SystemExit:
        pass  # SIGTERM / SIGINT / stdin EOF: a normal stop
    finally:
        server.server_close()
    sys.stderr.flush()
    # Nothing here needs finalizing, and tearing down moto's many objects takes ~0.4 s.
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """``python -m amibuild.sandbox [--port N]`` runs in the foreground; ``serve`` is the child."""
    parser = argparse.ArgumentParser(
        prog="python -m amibuild.sandbox", description="Run the local AWS emulator (moto, seeded)."
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)"
    )
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the emulator process itself (used by Sandbox)")
    serve.add_argument("--port", type=int, default=0, dest="serve_port")
    serve.add_argument("--watch-stdin", action="store_true", help="exit when stdin closes")
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            _serve(LOOPBACK, args.serve_port, args.watch_stdin)
        except SandboxError as exc:  # e.g. a moto without what we patch: one line for the parent
            print(f"{CHILD_PREFIX}{exc}", file=sys.stderr, flush=True)
            return EXIT_REFUSED
        return 0
    try:
        serve_foreground(port=args.port)
    except AmibuildError as exc:
        print(f"amibuild sandbox: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # Ctrl-C while still starting
        return 130
    return 0

