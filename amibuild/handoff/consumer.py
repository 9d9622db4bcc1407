"""Consumer-account guardrails: `amibuild allowed-amis` (the criteria that admit this pipeline's
images, and how to apply them) and `amibuild doctor --consumer` (run with a consumer account's
credentials: do its Allowed AMIs settings admit the channel's images, is block public access on,
can it see the images and use their keys). Each is a frozen request, a `run_*` job and a result;
`admission_note` is the one line nodegroup-deploy and karpenter say when the settings refuse an image.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from amibuild.aws import Aws
from amibuild.aws import accounts as reads
from amibuild.channels import known as known_channels
from amibuild.errors import AmibuildError, AwsError, SpecError
from amibuild.handoff import allowed
from amibuild.pipeline.keys import key_region, region_keys
from amibuild.pipeline.naming import parameter_name
from amibuild.pipeline.options import Options, load_pipeline

_ACCOUNT = re.compile(r"[0-9]{12}")


def name_prefixes(pipeline: Any) -> list[str]:
    """The image name prefix of every variant, as the rendered template names its images."""
    out = []
    for v in pipeline.variants:
        named = v.packer_vars.get("ami_name")
        out.append(re.sub(r"\{\{[^}]*\}\}.*", "", str(named)).rstrip("-") if named else
                   str(v.packer_vars.get("ami_name_prefix") or f"{pipeline.name}-{v.name}-{v.kubernetes_version}-{v.arch}"))
    return list(dict.fromkeys(out))


# ------------------------------------------------------------------------------- allowed-amis


@dataclass(frozen=True)
class AllowedAmisResult:
    provider: str
    regions: tuple[str, ...]
    criteria: tuple[allowed.Criterion, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "regions": list(self.regions),
                "ImageCriteria": [c.to_api() for c in self.criteria],
                "commands": allowed.cli_commands(self.criteria, self.regions),
                "cloudformation": allowed.cloudformation(self.criteria)}

    def lines(self) -> list[str]:
        out = [f"Allowed AMIs criteria that admit this pipeline's images (provider account {self.provider}):"]
        out += [f"  criterion {n}: {c.label()}" for n, c in enumerate(self.criteria, 1)]
        out += ["", "Apply them in each consumer account and region (replace swaps the account's criteria: keep "
                "its own beside these):"]
        out += [f"  {line}" for line in allowed.cli_commands(self.criteria, self.regions)]
        out += ["", "Or deploy this CloudFormation template in each consumer account and region (a StackSet):",
                json.dumps(allowed.cloudformation(self.criteria), indent=2)]
        return out


def run_allowed_amis(opts: Options, provider: str = "", max_days_since_created: int | None = None,
                     max_days_since_deprecated: int | None = None) -> AllowedAmisResult:
    """The criteria that admit the pipeline's images from ``provider`` (default: the caller's account)."""
    for flag, value in (("--max-days-since-created", max_days_since_created),
                        ("--max-days-since-deprecated", max_days_since_deprecated)):
        if value is not None and not 0 <= value <= 2147483647:
            raise SpecError(f"{flag} {value}: a number of days, 0 or more")
    if provider and not _ACCOUNT.fullmatch(provider):
        raise SpecError(f"--provider {provider!r}: the build account's 12-digit id")
    pipeline = load_pipeline(opts)
    if not provider:
        provider = Aws(profile=opts.profile, region=pipeline.build_region).caller_identity(pipeline.build_region)["account"]
    criteria = allowed.pipeline_criteria(provider, name_prefixes(pipeline),
                                         max_days_since_created=max_days_since_created,
                                         max_days_since_deprecated=max_days_since_deprecated)
    return AllowedAmisResult(provider, pipeline.target_regions, criteria)


# ------------------------------------------------------------------------------- doctor --consumer


@dataclass(frozen=True)
class ConsumerSettings:
    """What `amibuild doctor --consumer` checks with (the consumer's credentials are `options.profile`)."""

    options: Options
    channel: str = ""  # default: the pipeline's default channel
    build_profile: str = ""  # the build account's profile, to read the channel ("": the consumer's own)


@dataclass(frozen=True)
class Check:
    """One line of a doctor report (here and `amibuild.jobs.doctor_job`): what was checked, whether it
    is fine, and what it found or what to do."""

    name: str
    ok: bool
    message: str
    warn: bool = False  # fine to go on, but worth acting on (shown as WARN; doctor still passes)

    def line(self) -> str:
        state = "FAIL" if not self.ok else "WARN" if self.warn else "ok"
        return f"{state:<4} {self.name}: {self.message}"


@dataclass(frozen=True)
class RegionFacts:
    """What was gathered in one region: settings, block public access, the channel's images."""

    region: str
    settings: allowed.Settings | None
    settings_error: str = ""
    block_public: str = ""
    block_error: str = ""
    images: Mapping[str, str] = field(default_factory=dict)  # label (variant/channel) -> AMI id ("" none)
    seen: Mapping[str, reads.SharedImage | None] = field(default_factory=dict)  # AMI -> as the consumer sees it
    known: Mapping[str, allowed.SeenImage] = field(default_factory=dict)  # AMI -> as the build account sees it
    # AMI -> whom its launch permission names: account ids, "all", organisation and OU ARNs
    launch_users: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    keys: Mapping[str, str] = field(default_factory=dict)  # key id -> "" usable, else why not


def decide(account: str, facts: Sequence[RegionFacts]) -> list[Check]:
    """The consumer's checks, one row per region and image (pure)."""
    rows = []
    for f in facts:
        r = f.region
        if f.settings is None:
            rows.append(Check(f"allowed-amis {r}", False, f"cannot read the settings: {f.settings_error}"))
        if f.block_error:
            rows.append(Check(f"block-public-access {r}", False, f"cannot read it: {f.block_error}"))
        elif f.block_public == "block-new-sharing":
            rows.append(Check(f"block-public-access {r}", True, "block-new-sharing"))
        else:
            rows.append(Check(f"block-public-access {r}", False,
                            f"{f.block_public or 'unknown'}: turn it on with `aws ec2 enable-image-block-public-access "
                            f"--region {r} --image-block-public-access-state block-new-sharing`"))
        for label, ami in f.images.items():
            name = f"image {label} {r}"
            if not ami:
                rows.append(Check(name, False, "the channel has no image here (or the build account's parameter "
                                             "cannot be read: give --build-profile)"))
                continue
            seen, known = f.seen.get(ami), f.known.get(ami)
            facts_of = known or (allowed.SeenImage(ami, seen.owner, seen.name, seen.creation_date,
                                                   seen.deprecation_time) if seen else None)
            if f.settings is not None and facts_of is not None:
                verdict = allowed.admission(f.settings, facts_of, account)
                if not verdict.allowed:
                    state = {"enabled": "enabled", "audit-mode": "audit-mode (refuses nothing yet)",
                             "disabled": "disabled (refuses nothing yet)"}.get(f.settings.state, f.settings.state)
                    rows.append(Check(f"allowed-amis {r}", f.settings.state != "enabled",
                                    f"{state}: {ami} ({facts_of.name}, provider {facts_of.owner}) is not "
                                    f"admitted: {'; '.join(verdict.reasons)}; run `amibuild allowed-amis` for "
                                    "criteria that admit it", warn=f.settings.state != "enabled"))
                else:
                    rows.append(Check(f"allowed-amis {r}", True, f"{f.settings.state}: admits {ami}"))
            users = f.launch_users.get(ami)
            # shared publicly or with an organisation or OU: whether that covers the account, visibility says
            if users is not None and account not in users and not any(u == "all" or u.startswith("arn:") for u in users):
                rows.append(Check(name, False, f"{ami} is not shared with account {account}: add it to the pipeline's "
                                             "ami_users and publish again"))
            elif seen is None:
                rows.append(Check(name, False, f"{ami} is not visible from account {account} (not shared with it, or "
                                             "hidden by its Allowed AMIs settings)"))
            else:
                rows.append(Check(name, True, f"{ami} visible ({seen.state})"))
        for key, why in f.keys.items():
            rows.append(Check(f"key {r}", not why, f"{key} usable (DescribeKey, CreateGrant)" if not why else
                            f"{key}: {why}; the key policy must allow account {account} kms:DescribeKey, "
                            "kms:CreateGrant, kms:Decrypt, kms:ReEncrypt*, kms:GenerateDataKey* (the build account's "
                            "`amibuild iam-policy --task share` prints the statements, or the grants)"))
    return rows


@dataclass(frozen=True)
class ConsumerResult:
    account: str
    rows: tuple[Check, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"account": self.account, "checks": [vars(r) for r in self.rows]}

    def lines(self) -> list[str]:
        return [f"consumer account {self.account}:"] + [r.line() for r in self.rows]

    def raise_for_status(self) -> None:
        failed = [r.name for r in self.rows if not r.ok]
        if failed:
            raise AmibuildError(f"doctor --consumer: {len(failed)} check(s) failed: {', '.join(dict.fromkeys(failed))}")


def _settings(aws: Aws, region: str) -> tuple[allowed.Settings | None, str]:
    try:
        raw = reads.allowed_images_settings(aws, region)
    except AwsError as exc:
        return None, str(exc)
    return allowed.Settings(str(raw.get("State", "disabled")),
                            tuple(allowed.criterion_from_api(c) for c in raw.get("ImageCriteria", []))), ""


def run_consumer(request: ConsumerSettings) -> ConsumerResult:
    pipeline = load_pipeline(request.options)
    channel = request.channel or pipeline.default_channel
    consumer = Aws(profile=request.options.profile, region=pipeline.build_region)
    builder = Aws(profile=request.build_profile, region=pipeline.build_region) if request.build_profile else consumer
    # the channel is read from the build account: a typo is refused there before any other call
    known_channels.require(builder, pipeline, pipeline.variants, known_channels.Asked(channel), every=False)
    identity = consumer.caller_identity(pipeline.build_region)
    account, grantee = identity["account"], reads.account_root(identity["arn"])
    owner = builder.caller_identity(pipeline.build_region)["account"] if builder is not consumer else ""
    facts = []
    for region in pipeline.channel_regions:
        settings, settings_error = _settings(consumer, region)
        try:
            block, block_error = reads.block_public_access(consumer, region), ""
        except AwsError as exc:
            block, block_error = "", str(exc)
        images: dict[str, str] = {}
        seen: dict[str, Any] = {}
        known: dict[str, allowed.SeenImage] = {}
        users: dict[str, frozenset[str] | None] = {}
        keys: dict[str, str] = {}
        for variant in pipeline.variants:
            found = builder.find_parameter(parameter_name(pipeline, variant, channel), region)
            ami = found.value if found is not None else ""
            images[f"{variant.name}/{channel}"] = ami
            if not ami:
                continue
            seen[ami] = reads.shared_image(consumer, region, ami)
            if owner:
                image = builder.find_image(region, ami)
                if image is not None:
                    known[ami] = allowed.SeenImage(ami, owner, image.name, image.creation_date, image.deprecation_time)
                try:
                    users[ami] = frozenset(builder.launch_permissions(region, ami))
                except AwsError:  # not readable (or gone): judged by what the consumer sees
                    users[ami] = None
            wanted = set(seen[ami].kms_key_ids if seen[ami] else ())
            key = region_keys(variant, pipeline.regions, pipeline.copy_to).get(region, "")
            if key_region(key) == region and ":key/" in key:  # an alias or bare id names the consumer's own keys
                wanted.add(key)
            for key in sorted(wanted):
                keys[key] = reads.key_usable(consumer, key, region, grantee)
        facts.append(RegionFacts(region, settings, settings_error, block, block_error, images, seen, known, users, keys))
    return ConsumerResult(account, tuple(decide(account, facts)))


# ------------------------------------------------------------------------------- the hand-off's note


def admission_note(aws: Aws, region: str, image_id: str) -> str:
    """One line when this account's Allowed AMIs settings would refuse (enabled) or flag (audit mode)
    ``image_id``; "" when they admit it, are disabled, or cannot be read (nothing is claimed then)."""
    try:
        settings, error = _settings(aws, region)
        if settings is None or settings.state == "disabled":
            return ""
        account = aws.caller_identity(region)["account"]
        seen = reads.shared_image(aws, region, image_id)
    except AwsError:
        return ""
    if seen is None:
        if settings.state != "enabled":
            return ""
        return (f"warning: {image_id} is not visible in account {account} in {region}: its Allowed AMIs settings "
                "(enabled) may refuse it, or it is not shared with the account; run `amibuild doctor --consumer`")
    verdict = allowed.admission(settings, allowed.SeenImage(image_id, seen.owner, seen.name, seen.creation_date,
                                                            seen.deprecation_time), account)
    if verdict.allowed:
        return ""
    word = "would refuse" if verdict.refused else "would refuse once enabled (audit-mode now)"
    return (f"warning: account {account}'s Allowed AMIs settings in {region} {word} {image_id} ({seen.name}): "
            f"{'; '.join(verdict.reasons)}; run `amibuild allowed-amis` for criteria that admit it")


def deploy_note(aws: Aws, region: str, image_id: str = "", parameter: str = "") -> str:
    """`admission_note` for the image a deploy names: ``image_id``, else the value of ``parameter``."""
    if not image_id and parameter:
        try:
            found = aws.find_parameter(parameter, region)
        except AwsError:
            return ""
        image_id = found.value if found is not None else ""
    return admission_note(aws, region, image_id) if image_id else ""
