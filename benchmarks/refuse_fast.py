"""How fast amibuild says no: a dead AWS endpoint, and bad input that used to cost a minute.

Three commands through the real CLI (`python -m invoke -r <repo> ...`), each timed from start to
its one-line error, median of a few runs:

* `channels` with AWS_ENDPOINT_URL on a loopback port nobody listens on — target 5 s (it was
  silent for 31 s with botocore's retries);
* `render --var-file` of a var-file just under the 64 KiB cap holding ~10,000 package names —
  refused by the 200-packages cap (a 4 MB pipeline file of package names once rendered for 67 s);
* `build-ami --dry-run --timeout abc` — a bad flag, refused before anything else.

Everything runs on loopback with dummy credentials and the tripwire proxy; nothing leaves the machine.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import BenchmarkError, Report, Row, Target

NAME = "refuse_fast"
DESCRIPTION = "time to the one-line error: dead endpoint, oversized var-file, bad flag"

ROOT = Path(__file__).resolve().parent.parent
RUNS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-west-2", "AWS_EC2_METADATA_DISABLED": "true", "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost",
        "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    })
    return env


def _time(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        samples.append(time.perf_counter() - started)
        if proc.returncode == 0 or "amibuild: error:" not in proc.stderr:
            raise BenchmarkError(f"`invoke {' '.join(args)}` did not refuse: {proc.stderr[-500:]}")
    return statistics.median(samples)


def run() -> Report:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "amibuild.hcl").write_text('pipeline {\n  name = "bench"\n}\n\nvariant "v" {\n}\n')
        count = (63 * 1024) // 6
        (cwd / "big.pkrvars.hcl").write_text("extra_packages = [" + ", ".join(['"p"'] * count) + "]\n")
        env = _env(f"http://127.0.0.1:{_free_port()}")
        dead = _time(["channels"], cwd, env)
        big = _time(["render", "--var-file", "big.pkrvars.hcl"], cwd, env)
        flag = _time(["build-ami", "--dry-run", "--timeout", "abc"], cwd, env)
    return Report(
        rows=[
            Row("channels, dead endpoint", round(dead, 2), "s", Target(5.0)),
            Row(f"var-file of {count} packages (63 KiB)", round(big, 2), "s", Target(5.0, soft=True)),
            Row("build-ami --timeout abc", round(flag, 2), "s", Target(2.0, soft=True)),
            Row("dead endpoint vs its 5 s target", dead / 5.0, "x", Target(1.0)),
        ],
        setup=f"median of {RUNS} runs of each command through python -m invoke",
        notes=["the var-file is read by python-hcl2 (about 30 KB/s here) before the package cap refuses it"],
    )
