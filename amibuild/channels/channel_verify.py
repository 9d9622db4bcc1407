"""`amibuild verify`: what the pipeline's signed statements say about a channel's images (or one
image), region by region, and whether each holds.

`gather` reads (the channel's parameter and the image in each region, then the statements,
`channels.evidence`); `check` (pure) decides, per region: every stored statement about the image
verifies (signature by the pipeline's key, the image's record today as signed); a provenance
statement from this pipeline names it, and the channel's regions all hold the same build; the
newest test statement did not fail, and one passed where the channel's gate requires ``tested``.
The signed fingerprint is compared with the one a render of today's pipeline file gives (`Today`):
when they differ, the report says how (the settings that changed, the source AMI, amibuild's
version); a channel that trails today's file is not a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from amibuild import __version__
from amibuild.attest import predicates
from amibuild.aws import Aws, Image, fan_out
from amibuild.channels import evidence
from amibuild.channels.gates import PASSED
from amibuild.channels.plan import plain
from amibuild.errors import Unverified
from amibuild.pipeline.naming import parameter_name


@dataclass(frozen=True)
class Today:
    """What a render of today's pipeline file gives for one variant."""

    fingerprint: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    source_amis: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """One region's image to verify: the AMI the channel holds there (or --ami), and the image."""

    region: str
    ami: str  # "" when the channel has no parameter there
    image: Image | None


@dataclass(frozen=True)
class RegionCheck:
    region: str
    ami: str
    failures: tuple[str, ...]
    provenance: str  # what the provenance says, or why there is none
    test: str  # the verdict of the test statement that decides, or "not tested"
    variant: str = ""
    fingerprint: str = ""  # as signed
    run_id: str = ""  # the build's run, as signed
    today: str = ""  # how the signed fingerprint compares with a render of today's file ("" not compared)
    statements: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {**plain(self), "ok": self.ok}


@dataclass(frozen=True)
class VerifyReport:
    subject: str  # "ceph stable" or "ami-0123..."
    pipeline: str
    regions: tuple[RegionCheck, ...]
    key_problem: str = ""

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.regions) and bool(self.regions)

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "pipeline": self.pipeline, "ok": self.ok, "key_problem": self.key_problem or None,
                "regions": [r.to_dict() for r in self.regions]}

    def raise_for_status(self) -> None:
        if self.ok:
            return
        bad = [f"{r.region} {r.ami or '-'}: {'; '.join(r.failures)}" for r in self.regions if not r.ok]
        raise Unverified(f"verify {self.subject}: {len(bad)} of {len(self.regions)} region(s) fail: " + " | ".join(bad))


# ------------------------------------------------------------------------------- gather


@dataclass(frozen=True)
class Facts:
    subject: str
    pipeline: str
    variant: str  # "" for --ami: the provenance says which
    targets: tuple[Target, ...]
    found: Mapping[str, evidence.Statements | None]
    requires_test: bool
    key_problem: str = ""


def channel_targets(aws: Aws, pipeline: Any, variant: Any, channel: str, regions: Sequence[str]) -> list[Target]:
    """The AMI the channel holds in each region, and its image (the regions in parallel)."""
    name = parameter_name(pipeline, variant, channel)

    def one(region: str) -> Target:
        param = aws.find_parameter(name, region)
        if param is None:
            return Target(region, "", None)
        return Target(region, param.value, aws.find_image(region, param.value))

    found = fan_out(list(regions), one)
    return [found[r] for r in regions]


def gather(aws: Aws, pipeline: Any, targets: Sequence[Target], *, subject: str, variant: str = "",
           requires_test: bool = False) -> Facts:
    reader = evidence.Reader(aws, pipeline)
    found = reader.read({t.region: t.image for t in targets})
    return Facts(subject, pipeline.name, variant, tuple(targets), found, requires_test, reader.keys()[2])


# ------------------------------------------------------------------------------- check (pure)


def check(facts: Facts, today: Mapping[str, Today] | None = None) -> VerifyReport:
    """Every region's verdict, and the build the regions share. Pure."""
    rows = [_region(t, facts.found.get(t.region), facts, today or {}) for t in facts.targets]
    builds = {r.fingerprint for r in rows if r.fingerprint}
    if len(builds) > 1:  # a region pointed at another build (or by hand at another image of ours)
        held = ", ".join(f"{r.region}: {r.fingerprint[:12]} (run {r.run_id or '-'})" for r in rows if r.fingerprint)
        rows = [replace(r, failures=(*r.failures, f"the regions hold different builds ({held})")) for r in rows]
    return VerifyReport(facts.subject, facts.pipeline, tuple(rows), facts.key_problem)


def _region(target: Target, found: evidence.Statements | None, facts: Facts, today: Mapping[str, Today]) -> RegionCheck:
    base = dict(region=target.region, ami=target.ami)
    if not target.ami:
        return RegionCheck(**base, failures=("the channel has no parameter here",), provenance="-", test="-")
    if target.image is None or found is None:
        return RegionCheck(**base, failures=(f"{target.ami} does not exist here (deregistered?)",), provenance="-",
                           test="-")
    failures = [f"{_kind(v)} statement {_name(v)} does not verify: {v.reason()}"
                for v in (*found.provenance, *found.test, *found.scan) if not v.ok]
    variant = facts.variant or variant_of(found)
    chosen = evidence.provenance_of(found, facts.pipeline, variant) if variant else None
    fingerprint = run_id = compared = ""
    if chosen is None:
        why = evidence.FOREIGN if not found.provenance else "no valid provenance statement from this pipeline"
        if found.key_problem:
            why += f" ({found.key_problem})"
        failures.append(f"provenance: {why}")
        provenance = why
    else:
        fingerprint, run_id = predicates.fingerprint_of(chosen.predicate), predicates.run_of(chosen.predicate)
        provenance = f"built by {facts.pipeline} {variant}, run {run_id or '-'}, fingerprint {fingerprint[:12] or '-'}"
        if variant in today:
            compared = _compare(chosen, today[variant], target.region)
    test = evidence.test_of(found)
    verdict = evidence.verdict(test) if test else ""
    if verdict and verdict != PASSED:
        failures.append(f"test: its signed test statement says {verdict}")
    elif not verdict and facts.requires_test:
        failures.append("test: no signed test statement says passed, and the channel's gate requires tested")
    shown = f"{verdict} (run {test.predicate.get('run') or '-'})" if test and verdict else "not tested"
    return RegionCheck(**base, failures=tuple(failures), provenance=provenance, test=shown, variant=variant,
                       fingerprint=fingerprint, run_id=run_id, today=compared,
                       statements=len(found.provenance) + len(found.test) + len(found.scan))


def _kind(v: Any) -> str:
    return next((kind for kind in ("provenance", "scan") if kind in (v.key or "").split("/")), "test")


def _name(v: Any) -> str:
    return (v.key or "").rsplit("/", 1)[-1].removesuffix(".dsse.json") or "?"


def variant_of(found: evidence.Statements) -> str:
    """The variant the newest valid provenance statement names ("" when none is valid)."""
    return next((predicates.variant_of(v.predicate) for v in reversed(found.provenance) if v.ok), "")


def _compare(v: Any, today: Today, region: str) -> str:
    """How the signed build compares with a render of today's file."""
    signed = predicates.fingerprint_of(v.predicate)
    if signed == today.fingerprint:
        return "as today's render"
    inputs = predicates.internal(v.predicate).get("fingerprintInputs") or {}
    keys = sorted(set(inputs) | set(today.settings)) if isinstance(inputs, Mapping) and today.settings else []
    diffs = [f"{key}: {_short(inputs.get(key))} -> {_short(today.settings.get(key))}" for key in keys
             if inputs.get(key) != today.settings.get(key)]
    sources = predicates.source_amis_of(v.predicate)
    now_source = today.source_amis.get(region)
    if now_source and sources.get(region) and sources[region] != now_source:
        diffs.append(f"source AMI: {sources[region]} -> {now_source}")
    built_with = predicates.amibuild_version_of(v.predicate)
    if built_with and built_with != __version__:
        diffs.append(f"amibuild: {built_with} -> {__version__}")
    head = f"differs from today's render ({signed[:12]} -> {today.fingerprint[:12]})"
    return f"{head}: {', '.join(diffs)}" if diffs else f"{head}: the settings and source AMI are the same, the rendered files differ"


def _short(value: Any) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------------------- report


def lines(report: VerifyReport) -> list[str]:
    out = [f"verify {report.subject} ({report.pipeline}):"]
    if report.key_problem:
        out.append(f"  key: {report.key_problem}")
    for r in report.regions:
        verdict = "ok" if r.ok else "FAILED"
        out.append(f"  {r.region} {r.ami or '-'}: {verdict}; provenance: {r.provenance}; test: {r.test}"
                   + (f"; {r.today}" if r.today else ""))
        out.extend(f"    - {f}" for f in r.failures)
    return out
