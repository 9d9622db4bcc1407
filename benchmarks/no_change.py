"""A no-change run: 50 variants x 2 regions, all already built. How long, and how many AWS calls?

Setup (not part of the target): against the local emulator, a pipeline of 50 variants built in
us-west-2 and copied to eu-west-1 is built once with the real packer (`--parallel 8`). Then the same
`invoke build-ami --json` again: every variant must come back `skipped`, and no `packer build` may
run (a logging packer wrapper tells). Those no-change runs are timed as whole
`python -m invoke ... build-ami` subprocesses, interleaved with `build-ami --help` (invoke and
amibuild start-up alone, the floor under any run), medians.

AWS calls are counted on the wire: every call goes through tests/faultproxy.py's `FaultProxy`, a
forwarder on 127.0.0.1 in front of the emulator (`AWS_ENDPOINT_URL` points at it) that records each
request's operation and SigV4 region. (`amibuild.jobs.build_ami.run` makes its own `Aws`, so its `.calls`
list cannot be handed in from outside; and the proxy counts real HTTP requests, retries included.)
The setup build goes through the proxy as well: the endpoint is rendered into the template, so it
is part of the fingerprint and must not change between the build and the no-change run. The extra
loopback hop per call (the proxy with TCP_NODELAY, see `_buildkit.fault_proxy_class`) is measured
in-process, boto3 GetParameter direct vs through the proxy, and its share of the wall estimated.

Target (a regression guard, issue 30): wall <= 2.5 s, and one DescribeImages per region.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

from benchmarks.common import Report, Row, Target, Timing, interleave, ms, subprocess_command

NAME = "no_change"
DESCRIPTION = "build-ami with 50 variants x 2 regions already built: wall time and AWS calls"

VARIANTS = 50
REGIONS = ("us-west-2",)
COPY_TO = ("eu-west-1",)
SETUP_PARALLEL = 8
RUNS = 5  # timed no-change runs, after one warm-up
CALIBRATION_CALLS = 30
WALL_TARGET = Target(2500.0)  # ms (issue 30's regression guard: 2.5 s)
ONE_PER_REGION = Target(1)
DESCRIBE = "DescribeImages"
GET_PARAMETER = "AmazonSSM.GetParameter"


def run() -> Report:
    from amibuild.bake import prepare
    from amibuild import render as render_mod
    from amibuild.sandbox import Sandbox
    from benchmarks import _buildkit as kit

    kit.packer_binary()
    kit.byte_compile()
    fault_proxy = kit.fault_proxy_class()
    sandbox = Sandbox().start()
    try:
        with fault_proxy(sandbox.endpoint) as proxy, \
                tempfile.TemporaryDirectory(prefix="amibuild-bench-nochange-") as tmp:
            work = Path(tmp)
            pipeline_file = work / "amibuild.hcl"
            pipeline_file.write_text(kit.pipeline_text(VARIANTS, regions=REGIONS, copy_to=COPY_TO, name="nochange"),
                                     encoding="utf-8")
            wrapper, log = kit.write_wrapper(work)
            env = kit.child_env(sandbox.env(), endpoint=proxy.endpoint, wrapper=wrapper)

            setup = kit.build_ami(work, env, "--parallel", str(SETUP_PARALLEL), timeout=600)
            kit.expect(setup, "built", VARIANTS, f"setup build (--parallel {SETUP_PARALLEL})")
            setup_calls, setup_builds = len(proxy.log), _count(kit.packer_calls(log), "build")

            runs: list[tuple[float, list, list]] = []  # (wall, requests seen, packer calls) per run

            def no_change() -> None:
                mark, packer_mark = len(proxy.log), len(kit.packer_calls(log))
                result = kit.build_ami(work, env)
                kit.expect(result, "skipped", VARIANTS, "no-change run")
                runs.append((result.seconds, list(proxy.log[mark:]), kit.packer_calls(log)[packer_mark:]))

            help_argv = [sys.executable, "-m", "invoke", "-r", str(kit.ROOT), "build-ami", "--help"]
            timings = interleave({"no-change": no_change,
                                  "help": subprocess_command(help_argv, cwd=work, env=env)}, runs=RUNS)
            with kit.environ(env):
                direct, proxied = _hop_cost(sandbox.endpoint, proxy.endpoint)

            with kit.environ(env):
                pipeline = prepare.load_pipeline(prepare.Options(pipeline_file=str(pipeline_file)))
            parameters = {render_mod.eks_parameter(v) for v in pipeline.variants}
    finally:
        sandbox.stop()

    timed = runs[1:]  # the first entry is interleave's warm-up round
    wall = Timing(tuple(seconds for seconds, _, _ in timed))
    start_up = timings["help"]
    seen, packer = timed[-1][1], timed[-1][2]
    same = all(Counter((s.op, s.region) for s in r[1]) == Counter((s.op, s.region) for s in seen) for r in timed)
    by_op = Counter(s.op for s in seen)
    describe = {region: sum(1 for s in seen if s.op == DESCRIBE and s.region == region)
                for region in (*REGIONS, *COPY_TO)}
    get_parameter = {region: sum(1 for s in seen if s.op == GET_PARAMETER and s.region == region)
                     for region in REGIONS}
    other = {op: n for op, n in by_op.items() if op not in (DESCRIBE, GET_PARAMETER)}
    not_forwarded = [s for s in seen if s.outcome != "forwarded"]
    hop = proxied.median - direct.median

    rows = [
        Row(f"no-change run, {VARIANTS} variants x {len(REGIONS) + len(COPY_TO)} regions (wall)", ms(wall.median),
            target=WALL_TARGET, detail=wall.spread()),
        Row("  `build-ami --help`: start-up alone", ms(start_up.median), detail=start_up.spread()),
        Row("  the rest: imports, plan, render, AWS calls, writes", ms(wall.median - start_up.median)),
        Row("AWS calls in one no-change run, total", len(seen), ""),
    ]
    rows += [Row(f"  DescribeImages, {region}", n, "", target=ONE_PER_REGION) for region, n in describe.items()]
    rows += [Row(f"  ssm GetParameter (source AMI), {region}", n, "",
                 detail=f"{len(parameters)} distinct parameters among {VARIANTS} variants")
             for region, n in get_parameter.items()]
    rows += [
        Row("  other calls", sum(other.values()), "",
            detail=", ".join(f"{op} {n}" for op, n in sorted(other.items())) or "none"),
        Row("`packer build` calls in the no-change runs", sum(_count(r[2], "build") for r in timed), "",
            detail=f"packer calls per run: {_tally(packer) or 'none'}"),
        Row("proxy hop, per AWS call", ms(hop), detail=f"GetParameter direct {ms(direct.median):.1f} ms, "
            f"via proxy {ms(proxied.median):.1f} ms, n={CALIBRATION_CALLS}"),
    ]
    notes = [
        (f"setup (not timed for the target): {VARIANTS} variants built with --parallel {SETUP_PARALLEL} in "
         f"{setup.seconds:.1f} s, {setup_builds} `packer build` calls, {setup_calls} AWS requests through the "
         f"proxy (packer's own included)"),
        (f"every timed run reported {VARIANTS} skipped; AWS calls per run "
         + ("identical in all runs" if same else "DIFFERED between runs (the table shows the last)")),
        (f"the proxy adds about {ms(hop):.1f} ms per call: at most ~{ms(hop * len(seen)):.0f} ms of the wall if "
         f"every call were sequential; run without it, the wall would be that much lower at best"),
    ]
    if not_forwarded:
        outcomes = Counter(x.outcome for x in not_forwarded)
        notes.append(f"{len(not_forwarded)} request(s) not forwarded by the proxy: {dict(outcomes)}")
    setup_line = (f"{RUNS} no-change runs interleaved with `build-ami --help`, 1 warm-up round; medians; "
                  f"AWS calls counted by a forwarding proxy on 127.0.0.1")
    return Report(rows, notes, setup=setup_line)


def _hop_cost(direct_endpoint: str, proxy_endpoint: str) -> tuple[Timing, Timing]:
    """Seconds per GetParameter call, straight to the emulator and through the proxy, alternating."""
    import boto3

    from amibuild.sandbox import DEFAULT_REGION, recommended_parameter

    name = recommended_parameter("1.30", "al2", "x86_64")
    clients = {label: boto3.client("ssm", region_name=DEFAULT_REGION, endpoint_url=url)
               for label, url in (("direct", direct_endpoint), ("proxied", proxy_endpoint))}
    timings = interleave({label: (lambda c=c: c.get_parameter(Name=name)) for label, c in clients.items()},
                         runs=CALIBRATION_CALLS, warmup=3)
    return timings["direct"], timings["proxied"]


def _count(calls, subcommand: str) -> int:
    return sum(1 for c in calls if c.subcommand == subcommand)


def _tally(calls) -> str:
    counts = Counter(c.subcommand for c in calls)
    return ", ".join(f"{n} {sub}" for sub, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
