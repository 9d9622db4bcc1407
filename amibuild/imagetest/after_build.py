"""build-ami --boot-test: a boot test of every variant built in this run, in parallel, before publishing.

Each built variant's image is booted in its build region (`boot.boot_test`); the result goes on a new
outcome of the variant (and so into the run record). A variant whose boot test fails is not published
(`boot_error` says why, so the run exits 1 for it) while the others go on. Variants reused from
an earlier run are not booted again: their images carry their own test tags, which the channel
gates read.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, Sequence

from amibuild import notify
from amibuild.attest.sign import Attestor
from amibuild.bake.executor import BuildOutcome, BuildStatus
from amibuild.errors import Interrupted
from amibuild.imagetest import boot
from amibuild.imagetest.statements import says_something, test_statement
from amibuild.poll import settled

BOOT_PARALLEL = 8


def boot_test_outcomes(aws: Any, plan: Any, outcomes: Sequence[BuildOutcome], settings: boot.BootTestSettings, *,
                       cancelled: Callable[[], bool], say: Callable[[str], None],
                       attestor: Attestor | None = None) -> tuple[tuple[BuildOutcome, ...], bool]:
    """Boot-test every built variant at once: the outcomes with each test's result on a new value,
    and False when a signal stopped them (their instances terminated). With an ``attestor``, each
    test's result is also a test statement about the image in every region (its S3 key under
    ``boot_test["statement"]``)."""
    variants = {i.name: i.rendered.variant for i in plan.items}
    region = plan.pipeline.build_region
    interrupted = [False]

    def one(outcome: BuildOutcome) -> BuildOutcome:
        if outcome.status is not BuildStatus.BUILT or not outcome.amis.get(region):
            return outcome  # reused images carry their own test tags, which the channel gates read
        if cancelled():
            return replace(outcome, boot_error="boot test not started: interrupted")
        try:
            result = boot.boot_test(aws, variant=variants[outcome.name], amis=dict(outcome.amis), region=region,
                                    run_id=plan.run_id, settings=settings, cancelled=cancelled, say=say)
        except Interrupted as exc:
            interrupted[0] = True
            return replace(outcome, boot_error=str(exc))
        for line in boot.report_lines(result):
            say(line)
        tested = result.to_dict()
        if attestor is not None and says_something(tested):
            stored = test_statement(attestor, tested, outcome.amis)
            say(f"  {stored.line()}")
            tested["statement"] = stored.to_dict()
        if plan.pipeline.events:
            notify.send(aws, plan.pipeline.events, [notify.schema.test_result(result.to_dict(), pipeline=plan.pipeline.name)],
                        region=region, say=say)
        error = ""
        if result.failed:
            # an infrastructure fault is "not tested: <reason>" (result.error), never called a failed test
            error = (f"boot test: {result.error}" if result.error else
                     "boot test failed: " + ", ".join(c.name for c in result.checks if c.verdict == "failed"))
        return replace(outcome, boot_test=tested, boot_error=error)

    built = sum(1 for o in outcomes if o.status is BuildStatus.BUILT)
    with ThreadPoolExecutor(max_workers=max(1, min(BOOT_PARALLEL, built))) as pool:
        tested = tuple(map(settled, [pool.submit(one, o) for o in outcomes]))
    return tested, not interrupted[0]
