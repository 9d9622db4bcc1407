"""`extends` resolved in linear time: a pipeline file of 1,600 variants, each extending the one before.

In process, `amibuild.pipeline.load` of every variant (`--all`) of a 1,600-link chain and of a
400-link one, fastest of 3 (the least disturbed by the rest of the machine). Each variant's chain
used to be walked and merged again from its root: 1,600 links took `matrix` 20.5 s. Now each block
is merged once onto its parent's result, so the whole load grows with the number of links: the
ratio of the two loads should be near 4 (linear), not 16 (quadratic). The python-hcl2 parse of the
file (about 30 KB/s here, linear, bounded by the 64 KiB file cap) is shown on its own.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.common import Report, Row, Target

NAME = "extends_chain"
DESCRIPTION = "pipeline load of a 1,600-link extends chain (linear, not quadratic)"
RUNS = 3


def _file(links: int) -> str:
    parts = ['pipeline {\n  name = "chain"\n}\n', 'variant "v0" {\n  volume_size = 20\n}\n']
    parts += [f'variant "v{i}" {{\n  extends = "v{i - 1}"\n}}\n' for i in range(1, links)]
    return "".join(parts)


def _fastest(action) -> float:
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return min(samples)


def run() -> Report:
    from amibuild import hcl
    from amibuild.pipeline import Overrides, load

    with tempfile.TemporaryDirectory() as tmp:
        long_, short = Path(tmp) / "long.hcl", Path(tmp) / "short.hcl"
        long_.write_text(_file(1600))
        short.write_text(_file(400))
        size = long_.stat().st_size
        hcl.loads(short.read_text())  # python-hcl2 builds its parser once: not part of any figure
        parse = _fastest(lambda: hcl.loads(long_.read_text(), keep_quotes=True))
        whole_long = _fastest(lambda: load(long_, Overrides(all_variants=True), required=True))
        whole_short = _fastest(lambda: load(short, Overrides(all_variants=True), required=True))
    return Report(
        rows=[
            Row(f"1,600 links ({size // 1024} KiB): load, every variant", round(whole_long * 1000), "ms",
                Target(5000, soft=True)),
            Row("  of which the python-hcl2 parse", round(parse * 1000), "ms"),
            Row("400 links: load, every variant", round(whole_short * 1000), "ms"),
            Row("1,600 / 400 links (linear ~4, quadratic ~16)", whole_long / whole_short, "x", Target(8.0)),
        ],
        setup=f"in process, fastest of {RUNS} loads of each file",
        notes=["the parse is python-hcl2's (lark), itself a little worse than linear in the file size; the 64 KiB "
               "file cap bounds it"],
    )
