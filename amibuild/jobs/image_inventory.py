"""The inventory commands' jobs: `sbom` (an image's package list), `diff` (two images side by side),
`scan` (its SBOM through Inspector's ScanSbom, the findings kept as a signed scan statement), and
`promote`'s one line: the diff of the image a channel held and the one it gets (`promote_line`).

An image is named by a channel (the AMI its parameter holds in the build region), an AMI id, or a
build-ami run id (the AMI the run record names). Its SBOM is the one stored beside its statements
whose SHA-256 the image's verified provenance (from this pipeline, for this variant) signs: an SBOM
nobody signed, or one altered since, is not read.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence

from amibuild.attest import store
from amibuild.attest import predicates
from amibuild.attest.sign import Attestor, Stored, attestor
from amibuild.attest.statement import SCAN
from amibuild.aws import Aws, Image
from amibuild.bake import record as records
from amibuild.bake.build_plan import new_run_id
from amibuild.channels import evidence, known, publish
from amibuild.channels.channel_verify import channel_targets
from amibuild.errors import AmibuildError, SpecError
from amibuild.inventory import diff as diffs
from amibuild.inventory import sbom
from amibuild.inventory import scan as scans
from amibuild.inventory.packages import Package
from amibuild.jobs.env import one_variant
from amibuild.jobs.requests_views import DiffRequest, SbomRequest, ScanRequest
from amibuild.pipeline.naming import parameter_name
from amibuild.pipeline.options import Options, load_pipeline
from amibuild.pipeline.value_checks import AMI_ID_FLAG

FORMATS = ("cyclonedx", "spdx", "table")
_RUN = re.compile(r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}", re.ASCII)


class NoSbom(AmibuildError):
    """An image has no SBOM its signed provenance vouches for."""


@dataclass(frozen=True)
class Located:
    """One image as a command names it, found."""

    label: str
    region: str
    image: Image


@dataclass(frozen=True)
class Inventory:
    """An image's signed package list: the SBOM document and what the provenance says beside it."""

    where: Located
    document: str  # the stored CycloneDX 1.5 JSON
    key: str
    packages: tuple[Package, ...]
    inputs: Mapping[str, Any]  # the fingerprint's inputs, as signed
    os_name: str
    findings: tuple[str, ...] | None = None  # vulnerability ids of its newest valid scan (None: never scanned)
    built: Mapping[str, str] = field(default_factory=dict)  # {image ARN: record digest} the provenance names

    def of_this_build(self, image: Image, account: str) -> bool:
        """Whether ``image`` is one the signed provenance names, as it is today: the same packages."""
        return evidence.names(self.built, image, account)


def locate(aws: Aws, options: Options, pipeline: Any, variant: Any, label: str, flag: str) -> Located:
    """The image ``label`` names (a channel, an AMI id or a run id) in the pipeline's build region."""
    region = pipeline.build_region
    if AMI_ID_FLAG.fullmatch(label):
        ami = label
    elif _RUN.fullmatch(label):
        path = records.record_path(options.build_dir, label)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise SpecError(f"{flag} {label}: no run record at {path}") from None
        if problem := records.check_record(record):
            raise SpecError(f"{flag} {label}: {path}: {problem}")
        amis = next((v.get("amis") or {} for v in record.get("variants", []) if v.get("name") == variant.name), {})
        if region not in amis:
            raise SpecError(f"{flag} {label}: the run built no image of {variant.name} in {region}")
        ami = amis[region]
    else:
        known.require(aws, pipeline, [variant], known.Asked(label, flag), every=False)
        param = aws.find_parameter(parameter_name(pipeline, variant, label), region)
        if param is None:
            raise SpecError(f"{flag} {label}: channel {label} of {variant.name} holds no image in {region}")
        ami = param.value
    image = aws.find_image(region, ami)
    if image is None:
        raise SpecError(f"{flag} {label}: image {ami} does not exist in {region}")
    return Located(label, region, image)


def inventory(aws: Aws, reader: evidence.Reader, pipeline: Any, variant: Any, where: Located) -> Inventory:
    """The image's SBOM that its verified provenance signs (the newest such), read and parsed."""
    found = reader.about(where.image)
    proof = evidence.provenance_of(found, pipeline.name, variant.name)
    ami = where.image.image_id
    if proof is None:
        raise NoSbom(f"{diffs.named(where.label, ami)}: {evidence.summarise(found, pipeline.name, variant.name).provenance}")
    digest = predicates.package_list_digest_of(proof.predicate)
    if not digest:
        raise NoSbom(f"{diffs.named(where.label, ami)}: its provenance records no package list (built before inventories, "
                     "or stage 1 brought none back): rebuild it to get one")
    place = reader.where
    keys = store.sbom_keys(aws, place.bucket, place.region, pipeline.name, ami)
    for key in reversed(keys):
        body = aws.get_object(place.bucket, key, place.region)
        if hashlib.sha256(body).hexdigest() == digest:
            inputs = dict(predicates.internal(proof.predicate).get("fingerprintInputs") or {})
            text = body.decode("utf-8")
            scans_ = [v for v in found.scan if v.ok]
            ids = tuple(sorted({f.id for f in evidence.findings_of(scans_[-1])})) if scans_ else None
            return Inventory(where, text, key, sbom.packages_of(text), inputs, str(inputs.get("os") or variant.os), ids,
                             evidence.built_by(proof))
    raise NoSbom(f"{diffs.named(where.label, ami)}: no SBOM in s3://{place.bucket}/{store.image_prefix(pipeline.name, ami)}sbom/ "
                 f"has the digest its signed provenance records (sha256 {digest[:12]}): "
                 f"{'altered or removed' if keys else 'none is stored'}")


# ------------------------------------------------------------------------------- sbom


@dataclass(frozen=True)
class SbomResult:
    inventory: Inventory
    format: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        where = self.inventory.where
        return {"label": where.label, "region": where.region, "image": where.image.image_id, "key": self.inventory.key,
                "format": self.format, "packages": [p.to_dict() for p in self.inventory.packages]}

    def lines(self) -> list[str]:
        return self.text.splitlines()


def _loaded(opts: Options) -> tuple[Any, Any, Aws]:
    """The pipeline, the one variant (`env.one_variant`), and its gateway."""
    pipeline, variant = one_variant(opts, "whose image this is")
    return pipeline, variant, Aws(profile=opts.profile, region=pipeline.build_region)


def check_subject(channel: str | None, ami: str | None, command: str) -> str:
    """The one image a command names (exit 2 for none, both or a malformed AMI id)."""
    if bool(channel) == bool(ami):
        raise SpecError(f"{command}: give --channel CHANNEL or --ami AMI (one of them)")
    if ami and not AMI_ID_FLAG.fullmatch(ami):
        raise SpecError(f"--ami {ami!r} is not an AMI id (ami- and 8 or 17 hex digits)")
    return ami or str(channel)


def run_sbom(request: SbomRequest, opts: Options) -> SbomResult:
    if request.format not in FORMATS:
        raise SpecError(f"--format {request.format!r}: one of {', '.join(FORMATS)}")
    label = check_subject(request.channel, request.ami, "sbom")
    pipeline, variant, aws = _loaded(opts)
    where = locate(aws, opts, pipeline, variant, label, "--ami" if request.ami else "--channel")
    found = inventory(aws, evidence.Reader(aws, pipeline), pipeline, variant, where)
    if request.format == "cyclonedx":
        text = json.dumps(json.loads(found.document), indent=2)
    elif request.format == "spdx":
        text = sbom.spdx(found.packages, os_name=found.os_name, image=where.image.image_id,
                         created=datetime.now(timezone.utc))
    else:
        text = "\n".join(sbom.table(found.packages))
    return SbomResult(found, request.format, text)


# ------------------------------------------------------------------------------- diff


@dataclass(frozen=True)
class DiffResult:
    result: diffs.ImageDiff
    markdown: bool = False

    def to_dict(self) -> dict[str, Any]:
        return self.result.to_dict()

    def lines(self) -> list[str]:
        return diffs.markdown(self.result).splitlines() if self.markdown else diffs.lines(self.result)


def side(found: Inventory) -> diffs.Side:
    return diffs.Side(found.where.label, found.where.image.image_id, found.packages, found.inputs, found.findings)


def run_diff(request: DiffRequest, opts: Options) -> DiffResult:
    for flag, value in (("--from", request.from_), ("--to", request.to)):
        if not value:
            raise SpecError(f"diff: {flag} names an image: a channel, an AMI id or a build-ami run id")
    pipeline, variant, aws = _loaded(opts)
    # both names checked (a typo'd channel: exit 2) before either image's statements are read
    before = locate(aws, opts, pipeline, variant, str(request.from_), "--from")
    after = locate(aws, opts, pipeline, variant, str(request.to), "--to")
    return DiffResult(diff_images(aws, pipeline, variant, before, after), request.markdown)


def diff_images(aws: Aws, pipeline: Any, variant: Any, old: Located, new: Located) -> diffs.ImageDiff:
    """The diff of two located images (`diff`, and `promote`'s one line)."""
    reader = evidence.Reader(aws, pipeline)
    return diffs.diff(side(inventory(aws, reader, pipeline, variant, old)),
                      side(inventory(aws, reader, pipeline, variant, new)))


def promote_line(opts, result) -> str:
    """The one line `promote` says about the change it makes (or plans) in the build region: the diff
    of the image the target channel held and the one it gets. Never fails the promote."""

    rows = [r for r in getattr(result, "regions", ()) if getattr(r, "previous_ami", "") and r.ami
            and r.previous_ami != r.ami]
    if not rows:
        return ""
    try:
        pipeline = load_pipeline(opts)
        variant = next(v for v in pipeline.variants if v.name == result.variant)
        row = next((r for r in rows if r.region == pipeline.build_region), rows[0])
        aws = Aws(profile=opts.profile, region=pipeline.build_region)
        old, new = (aws.find_image(row.region, ami) for ami in (row.previous_ami, row.ami))
        if old is None or new is None:
            return f"diff: not compared: {row.previous_ami if old is None else row.ami} is gone from {row.region}"
        return "diff: " + diff_images(aws, pipeline, variant, Located(f"{result.channel} before", row.region, old),
                                      Located(result.channel, row.region, new)).summary()
    except (AmibuildError, StopIteration) as exc:
        return f"diff: not compared: {exc}"


# ------------------------------------------------------------------------------- scan


class ScanRefused(AmibuildError):
    """An image's scan has findings its channel's `scan` policy refuses."""


@dataclass(frozen=True)
class Scanned:
    """One image's scan: its findings and the signed scan statement that keeps them."""

    amis: Mapping[str, str]  # {region: ami} the statement is about
    findings: tuple[scans.Finding, ...]
    stored: Stored
    batches: int

    def to_dict(self) -> dict[str, Any]:
        return {"amis": dict(self.amis), "batches": self.batches, "findings": [f.to_dict() for f in self.findings],
                "statement": self.stored.to_dict()}

    def lines(self) -> list[str]:
        out = [f"  {len(self.findings)} finding(s) in {self.batches} ScanSbom batch(es)"]
        out += [f"    {f.id} {f.severity}{'' if f.score is None else f' {f.score:g}'} {f.package}"
                + (f" (fixed in {f.fixed_in})" if f.fixed_in else "") for f in self.findings]
        out.append(f"  {self.stored.line()}")
        return out


def scan_predicate(found: Sequence[scans.Finding], *, sbom_digest: str, started: str, finished: str) -> dict[str, Any]:
    """The scan statement's predicate: in-toto's vulns fields, with amibuild's findings beside them. Pure."""
    return {"scanner": {"uri": "https://inspector-scan.amazonaws.com/scan/sbom", "version": "ScanSbom",
                        "result": [{"id": f.id, "severity": [{"method": "CVSS", "score": f.severity}]} for f in found]},
            "metadata": {"scanStartedOn": started, "scanFinishedOn": finished},
            "sbom": {"mediaType": "application/vnd.cyclonedx+json;version=1.5", "digest": {"sha256": sbom_digest}},
            "findings": [f.to_dict() for f in found]}


def scan_document(aws: Aws, attestor: Attestor, document: str, amis: Mapping[str, str], run_id: str) -> Scanned:
    """ScanSbom of the SBOM in batches (in the attestation region), the findings kept as a signed statement."""
    started = _now()
    parts = scans.batches(document)
    found = [f for part in parts for f in scans.findings(aws.scan_sbom(part, attestor.where.region))]
    unique = tuple(sorted(set(found), key=lambda f: (-scans.rank(f.severity), f.id, f.package)))
    digest = hashlib.sha256(document.encode("utf-8")).hexdigest()
    predicate = scan_predicate(unique, sbom_digest=digest, started=started, finished=_now())
    return Scanned(dict(amis), unique, attestor.make(dict(amis), SCAN, predicate, run_id), len(parts))


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ScanResult:
    label: str
    variant: str
    scanned: Scanned
    policy: scans.ScanPolicy | None  # the channel's `scan` block, when it has one
    verdict: scans.ScanVerdict | None
    left_out: tuple[str, ...] = ()  # the channel's images in other regions the statement does not name, and why

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "variant": self.variant, **self.scanned.to_dict(),
                "policy": None if self.policy is None else {"max_severity": self.policy.max_severity},
                "refused": None if self.verdict is None else self.verdict.reasons(), "left_out": list(self.left_out)}

    def lines(self) -> list[str]:
        out = [f"scan {self.variant} {self.label}: " + ", ".join(f"{r} {a}" for r, a in sorted(self.scanned.amis.items()))]
        out += [f"  note: {line}" for line in self.left_out]
        out += self.scanned.lines()
        if self.verdict is not None and self.policy is not None:
            out.append(f"  scan policy (refuses {self.policy.max_severity} and above): "
                       + ("passes" if self.verdict.passes else "REFUSES: " + "; ".join(self.verdict.reasons())))
            out += [f"  ignored: {f.id} until {i.until.isoformat()} ({i.reason})" for f, i in self.verdict.ignored]
        return out

    def raise_for_status(self) -> None:
        if self.scanned.stored.error:
            raise AmibuildError(f"scan {self.label}: the findings were not kept: {self.scanned.stored.error}")
        if self.verdict is not None and not self.verdict.passes:
            raise ScanRefused(f"scan {self.variant} {self.label}: refused by the channel's scan policy: "
                              + "; ".join(self.verdict.reasons()))


def run_scan(request: ScanRequest, opts: Options) -> ScanResult:
    label = check_subject(request.channel, request.ami, "scan")
    pipeline, variant, aws = _loaded(opts)
    where = locate(aws, opts, pipeline, variant, label, "--ami" if request.ami else "--channel")
    reader = evidence.Reader(aws, pipeline)
    found = inventory(aws, reader, pipeline, variant, where)
    amis = {where.region: where.image.image_id}
    left_out: list[str] = []
    if request.channel:  # the statement names the channel's image in every region that holds this build (its SBOM)
        for target in channel_targets(aws, pipeline, variant, request.channel, pipeline.target_regions):
            if target.image is None or target.region in amis:
                continue
            if found.of_this_build(target.image, reader.where.account):
                amis[target.region] = target.ami
            else:
                left_out.append(f"{target.ami} in {target.region} left out (not in the scan statement): not named by the "
                                f"signed provenance of the scanned image {where.image.image_id} (another build)")
    who = attestor(aws, pipeline, say=lambda _: None)
    if who is None:
        raise AmibuildError("scan: the findings cannot be kept as a statement: the attestation settings cannot be read")
    done = scan_document(aws, who, found.document, amis, new_run_id())
    gate = pipeline.gates.get(request.channel) if request.channel else None
    policy = gate.scan if gate is not None and "scanned" in gate.requires else None
    verdict = None
    if policy is not None:
        now = publish.aws_clock(aws, pipeline, variant, str(request.channel))
        verdict = scans.judge(done.findings, policy, now or datetime.max)
    return ScanResult(label, variant.name, done, policy, verdict, tuple(left_out))


def scan_built(aws: Aws, attestor: Attestor, plan: Any, sboms: Mapping[str, Any], say: Any,
               cancelled: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """--scan: each built variant's stored SBOM through ScanSbom, its findings a signed scan statement;
    once `cancelled` says so, no further variant is scanned."""
    out: dict[str, Any] = {}
    for name, kept in sorted(sboms.items()):
        if cancelled():
            break
        if kept.error:
            say(f"warning: {name}: not scanned: it has no SBOM ({kept.error})")
            continue
        amis = {r: k.split("/images/")[1].split("/")[0] for r, k in zip(plan.regions, kept.keys, strict=True)}
        try:
            found = out[name] = scan_document(aws, attestor, kept.document, amis, plan.run_id)
        except AmibuildError as exc:
            say(f"warning: {name}: not scanned: {exc}")
            continue
        say(f"{name}: scan: {len(found.findings)} finding(s)"
            + (f" ({', '.join(f'{f.id} {f.severity}' for f in found.findings)})" if found.findings else "")
            + f"; {found.stored.line()}")
    return out
