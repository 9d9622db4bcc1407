"""Stage 2, the boot test: one instance from the new image, every check through SSM Run Command.

Why it is built this way: docs/dev/decisions.md.
How often Run Command is polled is the platform's (``settings.poll``, `amibuild.jobs.platform`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from amibuild import tags
from amibuild.aws import Aws
from amibuild.aws.testing import InstanceState, TestInstances
from amibuild.errors import AmibuildError, AwsError, BootTestFailed, Interrupted
from amibuild.imagetest import invocation, kube
from amibuild.printable import printable
from amibuild.pipeline import imagetests
from amibuild.poll import until

PURPOSE_TAG = f"{tags.PREFIX}purpose"


@dataclass(frozen=True)
class BootTestSettings(imagetests.BootTestSettings):
    """Everything a boot test needs besides the image: the pipeline's ``test { ... }`` block with the
    flags laid over it (the cluster to join among them), how often to poll, and the user data."""

    poll: float = 5.0
    read_timeout: float = 0.0  # seconds one SendCommand / GetCommandInvocation waits (0: the gateway's 30)
    # {variant: the test instance's user data} (`amibuild.handoff.testnode`: the node group's, tainted)
    user_data: Mapping[str, str] = field(default_factory=dict)
    # the cluster's API (a `kube.Nodes`), opened before any AWS work when ``cluster`` is set
    nodes: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, pipeline_settings: imagetests.BootTestSettings, **flags: Any) -> "BootTestSettings":
        given = {k: v for k, v in flags.items() if v not in (None, "")}
        base = {f.name: getattr(pipeline_settings, f.name) for f in fields(imagetests.BootTestSettings)}
        return cls(**{**base, **given})


@dataclass(frozen=True)
class BootTestResult:
    variant: str
    region: str
    image_id: str
    run_id: str
    verdict: imagetests.Verdict
    checks: tuple[imagetests.CheckResult, ...] = ()
    instance_id: str = ""
    terminated: bool = False
    seconds: float = 0.0
    phases: Mapping[str, float] = field(default_factory=dict)  # seconds to running, status ok, SSM online, checks
    error: str = ""
    notes: tuple[str, ...] = ()
    tagged: tuple[str, ...] = ()  # region:ami tagged with the verdict
    started_at: float = 0.0  # epoch seconds
    cluster: str = ""
    node: str = ""  # the Node the instance registered as (--cluster)
    node_ready_seconds: float | None = None  # from launch until that Node was Ready with the test taint
    node_removed: bool = False
    says_nothing: str = ""  # why the test says nothing about the image (its instance launched all the same)

    @property
    def failed(self) -> bool:
        """A check failed or did not run, the node did not join, or the test itself broke (``error``: an
        infrastructure failure, "not tested", which never tags the image failed). A check that gave no
        result by itself is no failure: the image is tagged untested (unless it holds an earlier verdict),
        which no ``requires = ["tested"]`` gate takes."""
        return self.verdict in (imagetests.Verdict.FAILED, imagetests.Verdict.NOT_RUN) or bool(self.error)

    @property
    def conclusive(self) -> bool:
        """The checks gave a verdict about the image (passed or failed), which replaces an earlier one."""
        return self.verdict in (imagetests.Verdict.PASSED, imagetests.Verdict.FAILED, imagetests.Verdict.NOT_RUN)

    @property
    def tag_value(self) -> str:
        return imagetests.TAG_VALUES[self.verdict]

    def raise_for_status(self) -> None:
        if self.failed:
            raise BootTestFailed(f"boot test of {self.variant} failed" + (f": {self.error}" if self.error else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "region": self.region, "image_id": self.image_id, "run_id": self.run_id,
                "result": str(self.verdict), "tag": self.tag_value, "instance_id": self.instance_id or None, "terminated": self.terminated,
                "started": datetime.fromtimestamp(self.started_at, timezone.utc).isoformat(timespec="milliseconds"),
                "seconds": round(self.seconds, 2), "phases": {k: round(v, 2) for k, v in self.phases.items()},
                "error": self.error or None, "notes": list(self.notes), "tagged": list(self.tagged),
                "checks": [c.to_dict() for c in self.checks],
                "untestable": [c.name for c in imagetests.untestable(self.checks)],
                "cluster": self.cluster or None, "node": self.node or None,
                "node_ready_seconds": None if self.node_ready_seconds is None else round(self.node_ready_seconds, 2),
                "node_removed": self.node_removed, "says_nothing": self.says_nothing or None}


class _TimedOut(AmibuildError):
    """A boot test phase took longer than the test's timeout."""


class _Lost(AmibuildError):
    """The instance or its SSM agent went away, or never came: says nothing about the image."""


def _run_check(api: TestInstances, region: str, instance_id: str, check: imagetests.Check, *,
               settings: "BootTestSettings", run_id: str, variant: str, clock: Callable[[], float],
               sleep: Callable[[float], None], cancelled: Callable[[], bool]) -> tuple[imagetests.CheckResult, str]:
    """One check as its own SSM invocation: (its result, why the checks stop here: "" to go on).
    The verdict is the invocation's ResponseCode; its output is read as data (from S3 with
    ``settings.output_bucket``: the whole output's size and end)."""
    began = clock()
    prefix = f"amibuild/boot-test/{run_id}/{check.name}"
    # the agent's own timeout (executionTimeout) ends the command first; past this, nothing answers
    limit = began + check.timeout + 30 + max(60.0, 3 * settings.poll)

    def answer() -> Any:
        if cancelled():  # asked before each look: a signal stops the wait before the next call
            raise Interrupted(f"boot test of {variant} interrupted while waiting for check {check.name}")
        return api.invocation(region, command_id, instance_id)

    try:
        command_id = api.send_shell_script(region, instance_id, imagetests.check_command(check),
                                           timeout=int(check.timeout) + 30,
                                           comment=f"amibuild {variant} {check.name} {run_id}",
                                           output_bucket=settings.output_bucket, output_prefix=prefix)
        waited = until(answer, done=lambda got: got is not None and got.done, deadline=limit,
                       interval=settings.poll, clock=clock, sleep=sleep)
    except AwsError as exc:
        return invocation.not_tested(check.name, str(exc), clock() - began), str(exc)
    if not waited.done:
        why = (f"SSM command {command_id} ({check.name}) gave no result within {limit - began:.0f}s: the instance "
               "or its SSM agent does not answer")
        return invocation.not_tested(check.name, why, clock() - began), why
    done = waited.value
    seconds = clock() - began
    stored = invocation.Output(done.stdout, done.stderr)
    if settings.output_bucket and done.response_code >= 0:
        try:
            stored = invocation.Output(done.stdout, done.stderr, *(
                api.stored_output(region, settings.output_bucket, api.output_key(prefix, command_id, instance_id, s))
                for s in ("stdout", "stderr")), from_s3=True)
            if stored.stored_stdout is None and done.stdout:
                stored = invocation.Output(done.stdout, done.stderr)  # the agent could not write it: the head
        except AwsError:
            stored = invocation.Output(done.stdout, done.stderr)  # output is data: the head will do
    result = invocation.judge(check.name, done, stored, seconds)
    gone = result.verdict == imagetests.Verdict.NOT_TESTED and (done.status_details in invocation.GONE)
    return result, (result.reason if gone else "")


def boot_test(aws: Aws, *, variant: Any, amis: Mapping[str, str], region: str, run_id: str,
              settings: BootTestSettings, cancelled: Callable[[], bool] = lambda: False,
              clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
              say: Callable[[str], None] = lambda _: None, nodes: Any = None) -> BootTestResult:
    """Boot ``amis[region]``, run the variant's checks on it, terminate it, tag every image in ``amis``.

    With ``settings.cluster``, ``nodes`` (a `kube.Nodes`) is the cluster's API: the instance's Node
    must be Ready with the test taint before the checks run; it is deleted after the terminate."""
    api = TestInstances(aws, read_timeout=settings.read_timeout)
    nodes = nodes if nodes is not None else settings.nodes
    if settings.cluster and nodes is None:
        raise AmibuildError(f"boot test with --cluster {settings.cluster}: no Kubernetes API to watch the node on")
    checks = imagetests.check_set(variant, stage="boot").checks
    names = [c.name for c in checks]
    image_id = amis[region]
    started = clock()
    started_at = time.time()
    deadline = started + settings.timeout
    phases: dict[str, float] = {}
    instance_id = ""
    result: BootTestResult | None = None
    interrupted: BaseException | None = None
    notes: list[str] = []
    node: list[kube.NodeFacts | None] = [None]
    node_ready: float | None = None
    taint = kube.Taint.parse(kube.TEST_TAINT)
    untagged = [""]  # why the image says nothing (the cluster's API could not be read)

    def ended(verdict: imagetests.Verdict, checked: Iterable[imagetests.CheckResult], error: str) -> BootTestResult:
        return BootTestResult(variant.name, region, image_id, run_id, verdict, tuple(checked), instance_id,
                              phases=dict(phases), error=error)

    def wait(what: str, ready: Callable[[], bool]) -> None:
        def looked() -> bool:
            if cancelled():  # asked before each look: a signal stops the wait before the next call
                raise Interrupted(f"boot test of {variant.name} interrupted while waiting for {what}")
            return ready()

        if not until(looked, deadline=deadline, interval=settings.poll, clock=clock, sleep=sleep).done:
            raise _TimedOut(f"timed out after {settings.timeout:.0f}s waiting for {what}")
        if cancelled():  # a signal that came during the last call: nothing more is done
            raise Interrupted(f"boot test of {variant.name} interrupted after {what}")
        phases[what] = clock() - started

    try:
        instance_id = api.run_instance(
            region, image_id=image_id, instance_type=settings.instance_type or variant.effective_instance_type,
            subnet_id=settings.subnet_id, security_group_id=settings.security_group_id,
            instance_profile=settings.instance_profile, user_data=settings.user_data.get(variant.name, ""),
            tags={tags.RUN_ID: run_id, tags.VARIANT: variant.name, PURPOSE_TAG: "boot-test",
                  "Name": f"amibuild boot test {variant.name} {run_id}"})
        say(f"{variant.name}: boot test instance {instance_id} from {image_id} in {region}")

        def seen(when: str) -> InstanceState:  # one that stops or goes gives no status checks, no results
            state = api.state(region, instance_id)
            if state.state in ("shutting-down", "terminated", "stopped", "stopping"):
                raise _Lost(f"the instance {instance_id} is {state.state} {when}")
            return state

        wait("running", lambda: seen("before its checks ran").state == "running")

        def status_ok() -> bool:
            state = seen("during its status checks")
            if state.system_status == "impaired":  # AWS's host (power, network, hardware): not the image
                raise _Lost(f"EC2 system status check of {instance_id}: impaired (the AWS host it runs on)")
            if state.instance_status == "impaired":
                raise AmibuildError(f"EC2 instance status check of {instance_id}: impaired (its own software)")
            return state.system_status == "ok" and state.instance_status == "ok"

        wait("status checks", status_ok)
        try:
            wait("SSM agent", lambda: api.ssm_online(region, instance_id))
        except _TimedOut as exc:
            raise _Lost(f"{exc}: the instance's SSM agent never answered") from None
        if settings.cluster:
            launched = phases.get("running", 0.0)
            private_dns = api.state(region, instance_id).private_dns

            def joined() -> bool:
                try:
                    node[0] = kube.node_of(nodes.list(), instance_id, private_dns)
                except kube.ClusterUnreachable as exc:
                    untagged[0] = f"the cluster's API could not be read: {exc}"
                    raise
                seen = kube.judge(node[0], taint)
                if seen is kube.NodeState.UNTAINTED:
                    raise AmibuildError(f"node {node[0].name} of {instance_id} is Ready without the taint {taint}: "
                                        "the user data did not reach the kubelet")
                return seen is kube.NodeState.READY

            try:
                wait("node ready", joined)
            except _TimedOut:
                if node[0] is None:
                    raise _TimedOut(f"{instance_id} did not register as a node of cluster {settings.cluster} within "
                                    f"{settings.timeout:.0f}s") from None
                raise _TimedOut(f"node {node[0].name} of {instance_id} was not Ready within {settings.timeout:.0f}s"
                                + (f" ({node[0].reason})" if node[0].reason else "")) from None
            node_ready = phases["node ready"] - launched
            say(f"{variant.name}: node {node[0].name} joined {settings.cluster}, Ready with {taint} after "
                f"{node_ready:.1f}s")
        results: list[imagetests.CheckResult] = []
        stopped = ""  # an infrastructure failure that stopped the checks: the rest are not sent
        for check in checks:
            if stopped:
                results.append(invocation.not_tested(check.name, f"not sent: {stopped}"))
                continue
            done, stopped = _run_check(api, region, instance_id, check, settings=settings, run_id=run_id,
                                       variant=variant.name, clock=clock, sleep=sleep, cancelled=cancelled)
            results.append(done)
        phases["checks"] = clock() - started
        verdict = imagetests.overall(results)
        result = ended(verdict, results, f"not tested: {stopped}" if stopped else "")
        gaps = imagetests.untestable(results)
        if gaps and verdict == imagetests.Verdict.NOT_TESTED and not stopped:
            notes.append(f"not tested: {len(gaps)} check(s) gave no result ({', '.join(g.name for g in gaps)}); "
                         "the image keeps an earlier verdict, else is tagged untested, which a channel requiring "
                         "tested does not take")
    except (Interrupted, KeyboardInterrupt) as exc:
        interrupted = exc
    except AmibuildError as exc:
        if isinstance(exc, (AwsError, _Lost)):  # an AWS call failed or the instance was lost: not tested, never failed
            not_sent = (invocation.not_tested(n, f"not sent: {exc}") for n in names)
            result = ended(imagetests.Verdict.NOT_TESTED, not_sent, f"not tested: {exc}")
        else:
            not_run = (imagetests.CheckResult(n, "boot", imagetests.Verdict.NOT_RUN, None, 0.0) for n in names)
            result = ended(imagetests.Verdict.FAILED, not_run, str(exc))
    finally:
        terminated = _terminate(api, region, instance_id, notes)
        removed = _remove_node(nodes, node[0], notes) if terminated and node[0] is not None else False
    if interrupted is not None:
        left = "" if terminated or not instance_id else f"; instance {instance_id} may be left: `amibuild clean-run {run_id}`"
        raise Interrupted(f"boot test of {variant.name} interrupted; instance {instance_id or '(none)'} "
                          f"{'terminated' if terminated else 'NOT terminated'}{left}") from interrupted
    assert result is not None
    result = replace(result, terminated=terminated, seconds=clock() - started, notes=tuple(notes), started_at=started_at,
                     cluster=settings.cluster, node=node[0].name if node[0] else "", node_ready_seconds=node_ready,
                     node_removed=removed)
    if untagged[0]:
        notes.append(f"the image is not tagged: {untagged[0]}; this says nothing about the image")
        return replace(result, notes=tuple(notes), says_nothing=untagged[0])
    if not result.instance_id:  # RunInstances refused (rights, subnet, capacity): nothing is known of the image
        notes.append("the image is not tagged: no instance started, so this says nothing about the image")
        return replace(result, notes=tuple(notes))
    return replace(result, tagged=tuple(_tag(api, amis, result, notes)), notes=tuple(notes))


def _terminate(api: TestInstances, region: str, instance_id: str, notes: list[str]) -> bool:
    if not instance_id:
        return True
    try:
        api.aws.terminate_instances(region, [instance_id])
        state = api.state(region, instance_id).state
    except AmibuildError as exc:
        notes.append(f"could not terminate {instance_id}: {exc}; remove it with `amibuild clean-run`")
        return False
    return state in ("shutting-down", "terminated")


def _remove_node(nodes: Any, node: kube.NodeFacts, notes: list[str]) -> bool:
    """Cordon, then delete the terminated test instance's Node object, so no NotReady node of it stays
    in the cluster. Cordoning first is what `kubectl drain` does: the taint keeps workloads off, but a
    pod that tolerates it (a DaemonSet's) could still be bound in the moment before the delete."""
    try:
        if not nodes.cordon(node.name):
            return False  # already gone: someone else removed it
        return nodes.delete(node.name)
    except kube.ClusterUnreachable as exc:
        notes.append(f"could not delete node {node.name}: {exc}; `kubectl delete node {node.name}`")
        return False


def _tag(api: TestInstances, amis: Mapping[str, str], result: BootTestResult, notes: list[str]) -> list[str]:
    """Tag every image with the verdict. One that is not conclusive (not tested) never replaces an
    earlier verdict: each image's current tag is read first, and only an untagged image is tagged."""
    values = {tags.TEST: result.tag_value,
              tags.TESTED_AT: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), tags.TEST_RUN: result.run_id}
    done = []
    for region, ami in sorted(amis.items()):
        try:
            earlier = "" if result.conclusive else api.image_tag(region, ami, tags.TEST)
            if earlier:
                notes.append(f"{ami} in {region} keeps {tags.TEST}={earlier}: this run gave no verdict")
                continue
            api.tag_image(region, ami, values)
            done.append(f"{region}:{ami}")
        except AmibuildError as exc:
            notes.append(f"could not tag {ami} in {region} with the result: {exc}")
    return done


def report_lines(result: BootTestResult) -> list[str]:
    out = [f"{result.variant}: boot test {result.verdict} ({result.image_id} in {result.region}, "
           f"{result.seconds:.1f}s, instance {result.instance_id or '-'} "
           f"{'terminated' if result.terminated else 'NOT terminated'})"]
    if result.error:
        out.append(f"  error: {printable(result.error)}")
    width = max((len(c.name) for c in result.checks), default=0)
    for check in result.checks:
        size = (f"  output {check.output_size} bytes" if check.output_size is not None else
                "  output: head only (what SSM keeps: 24,000 characters of stdout, 8,000 of stderr)" if check.head_only else "")
        out.append(f"  {check.name.ljust(width)}  {check.stage:<5}  {check.verdict:<17}  {check.seconds:6.2f}s{size}")
        if check.reason:
            out.append(f"      {printable(check.reason)}")
        if check.verdict in (imagetests.Verdict.FAILED, imagetests.Verdict.UNTESTABLE) and check.tail:
            out += [f"      | {line}" for line in check.tail.splitlines()[-3 if check.verdict != "failed" else -10:]]
    if result.node_ready_seconds is not None:
        out.append(f"  node {result.node} joined {result.cluster}: Ready with {kube.TEST_TAINT} after "
                   f"{result.node_ready_seconds:.1f}s; {'cordoned and deleted' if result.node_removed else 'NOT deleted'} "
                   "after the terminate")
    elif result.node:
        out.append(f"  node {result.node} of {result.cluster}: {'deleted' if result.node_removed else 'NOT deleted'}")
    out += [f"  note: {printable(n)}" for n in result.notes]
    if result.tagged:
        out.append(f"  tagged {tags.TEST}={result.tag_value}: {', '.join(result.tagged)}")
    return out
