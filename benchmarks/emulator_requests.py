"""What one request costs the local emulator, as a ratio to what it costs the client making it.

The test suite is CPU-bound on 2 CPUs, and the emulator answers every AWS call of every test: a
cost it adds to each request (a scan, a listing, a lookup redone) shows here first. One emulator,
one boto3 client per service in this process; for each call kind, rounds of 100 calls, the kinds
interleaved. The emulator's CPU (all its threads, from /proc) and this process's CPU are read
around each round: the figures are medians of milliseconds of CPU per request. The ratio of the
two cancels the machine's speed. Target: the emulator spends at most 1.75x what the client does on
a GetParameter, a DescribeImages of the account's own images and a DescribeKeyPairs. Two runs on
the 2-CPU machine gave 1.25-1.51x with the sandbox's "made once" patches (moto's service list and
each response class's actions), and 2.06-2.71x on the tree before them.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Callable

from benchmarks.common import BenchmarkError, Report, Row, Target

NAME = "emulator_requests"
DESCRIPTION = "the emulator's CPU per request, as a ratio to the client's (GetParameter, DescribeImages, DescribeKeyPairs)"

ROUNDS = 7
CALLS = 100
TARGET = Target(1.75)
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float:
    """Seconds of CPU (user + system, every thread) process ``pid`` has used."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def run() -> Report:
    import boto3

    from amibuild.sandbox import Sandbox

    with Sandbox() as sandbox:
        if sandbox.pid is None:
            raise BenchmarkError("the emulator did not start")
        client = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                  "region_name": sandbox.region, "endpoint_url": sandbox.endpoint}
        ssm, ec2 = boto3.client("ssm", **client), boto3.client("ec2", **client)
        ssm.put_parameter(Name="/benchmark/image_id", Value="ami-0123456789abcdef0", Type="String")
        calls: dict[str, Callable[[], object]] = {
            "GetParameter": lambda: ssm.get_parameter(Name="/benchmark/image_id"),
            "DescribeImages (own)": lambda: ec2.describe_images(Owners=["self"]),
            "DescribeKeyPairs": lambda: ec2.describe_key_pairs(),
        }
        for call in calls.values():  # warm-up: clients' first requests, the emulator's first answers
            call()
        emulator: dict[str, list[float]] = {name: [] for name in calls}
        own: dict[str, list[float]] = {name: [] for name in calls}
        names = list(calls)
        for round_ in range(ROUNDS):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                before, mine = _cpu_of(sandbox.pid), time.process_time()
                for _ in range(CALLS):
                    calls[name]()
                own[name].append((time.process_time() - mine) / CALLS * 1000)
                emulator[name].append((_cpu_of(sandbox.pid) - before) / CALLS * 1000)
    rows = []
    for name in names:
        served, asked = statistics.median(emulator[name]), statistics.median(own[name])
        rows.append(Row(f"{name}: emulator CPU per request", served, "ms"))
        rows.append(Row(f"{name}: client CPU per request", asked, "ms"))
        rows.append(Row(f"{name}: emulator / client", served / asked, "x", TARGET))
    return Report(rows, setup=f"{ROUNDS} rounds of {CALLS} calls per kind, interleaved; medians")
