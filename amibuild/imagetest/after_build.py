"""build-ami --boot-test: a boot test of every variant built in this run, in parallel, before publishing.

Each built variant's image is booted in its build region (`boot.boot_test`); the result goes into
the variant's outcome (and so the run record). A variant whose boot test fails is not published
(`publish_error` says why, so the run exits 1 for it) while the others go on. Variants reused from
an earlier run are not booted again: their images carry their own test tags, which the channel
gates read.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from amibuild.bake.executor import BuildStatus
from amibuild.errors import Interrupted
from amibuild.imagetest import boot

BOOT_PARALLEL = 8


def boot_test_outcomes(aws: Any, plan: Any, outcomes: list, settings: boot.BootTestSettings, *,
                       cancelled: Callable[[], bool], say: Callable[[str], None]) -> bool:
    """Boot-test every built variant at once; False when a signal stopped them (instances terminated)."""
    variants = {i.name: i.rendered.variant for i in plan.items}
    region = plan.pipeline.build_region
    built = [o for o in outcomes if o.status is BuildStatus.BUILT and o.amis.get(region)]
    interrupted = [False]

    def one(outcome: Any) -> None:
        if cancelled():
            outcome.publish_error = "boot test not started: interrupted"
            return
        try:
            result = boot.boot_test(aws, variant=variants[outcome.name], amis=dict(outcome.amis), region=region,
                                    run_id=plan.run_id, settings=settings, cancelled=cancelled, say=say)
        except Interrupted as exc:
            interrupted[0] = True
            outcome.publish_error = str(exc)
            return
        outcome.boot_test = result.to_dict()
        for line in boot.report_lines(result):
            say(line)
        if result.failed:
            outcome.publish_error = "boot test failed" + (f": {result.error}" if result.error else
                                                          ": " + ", ".join(c.name for c in result.checks
                                                                           if c.verdict == "failed"))

    with ThreadPoolExecutor(max_workers=max(1, min(BOOT_PARALLEL, len(built)))) as pool:
        for future in [pool.submit(one, o) for o in built]:
            future.result()
    return not interrupted[0]
