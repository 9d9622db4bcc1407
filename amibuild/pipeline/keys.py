"""Per-region KMS keys of an encrypted variant: which key encrypts its image in each target region
(`region_keys`), and the refusals made at load, before any AWS work (`check`).

A KMS key belongs to one region, so a key ARN of another region is refused, and so is a copy left
to Packer's default (the copy region's AWS-managed `aws/ebs` key) while the variant names keys.
An image shared with other accounts (`ami_users`) must not use `aws/ebs` anywhere: its key policy
cannot be changed, so no other account can ever launch from it.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from amibuild.errors import SpecError

DEFAULT_EBS_ALIAS = "alias/aws/ebs"  # the AWS-managed key EBS uses when no key is named
FIELD = "region_kms_key_ids"
_ARN = re.compile(r"^arn:(aws[a-z-]*):kms:([a-z0-9-]+):([0-9]{12}):(key|alias)/([A-Za-z0-9/_-]+)\Z")
_ALIAS = re.compile(r"^alias/[A-Za-z0-9/_-]{1,250}\Z")
_KEY_ID = re.compile(r"^(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\Z")


def key_region(key: str) -> str:
    """The region a key ARN names ("" for an alias or key id: those resolve in the region used)."""
    match = _ARN.match(key)
    return match.group(2) if match else ""


def is_default_key(key: str) -> bool:
    """No key (EBS's default) or the AWS-managed `aws/ebs` key, by alias or alias ARN."""
    return not key or key == DEFAULT_EBS_ALIAS or key.endswith(":alias/aws/ebs")


def parse_map(value: Any, where: str) -> Mapping[str, str]:
    """`region_kms_key_ids` as written: a map (pipeline file, var-file) or REGION=KEY,... (--var)."""
    if value is None or value == "":
        return MappingProxyType({})
    if isinstance(value, str):
        out = {}
        for pair in filter(None, (p.strip() for p in value.split(","))):
            region, sep, key = pair.partition("=")
            if not sep or not region.strip():
                raise SpecError(f"{where}: write {FIELD} as a map, e.g. {FIELD} = {{ \"eu-west-1\" = "
                                "\"arn:aws:kms:eu-west-1:111122223333:key/...\" } (or REGION=KEY,... with --var)")
            out[region.strip()] = key.strip()
        value = out
    if not isinstance(value, Mapping):
        raise SpecError(f"{where}: {FIELD} must be a map of region to KMS key, e.g. {FIELD} = "
                        "{ \"eu-west-1\" = \"arn:aws:kms:eu-west-1:111122223333:key/...\" }")
    for region, key in value.items():
        if not isinstance(key, str):
            raise SpecError(f"{where}: {FIELD}[\"{region}\"] must be a string (a key ARN, id or alias)")
    return MappingProxyType(dict(sorted({str(region): key for region, key in value.items()}.items())))


def region_keys(variant: Any, regions: Iterable[str], copy_to: Iterable[str]) -> dict[str, str]:
    """The key that encrypts the variant's image in each target region ("" for EBS's default key);
    empty when the variant is not encrypted. A build region without its own entry uses kms_key_id."""
    if not variant.encrypted:
        return {}
    builds = tuple(dict.fromkeys(regions))
    # a copy region without an entry: "", Packer leaves that copy to the copy region's default key
    return {region: variant.region_kms_key_ids.get(region, variant.kms_key_id if region in builds else "")
            for region in dict.fromkeys((*builds, *copy_to))}


def check(variant: Any, regions: Iterable[str], copy_to: Iterable[str], ami_users: Iterable[str], *,
          known_regions: frozenset[str], where: str, file_regions: Iterable[str] = (),
          partitions: Mapping[str, str] = MappingProxyType({})) -> None:
    """Refuse (SpecError, exit 2) a key map that cannot work, naming the region and the field.
    ``file_regions``: the file's build regions when --region narrowed this run's; ``partitions``: each
    region's partition (aws, aws-cn, ...), which a key ARN names too."""
    regions, copy_to, shared = tuple(regions), tuple(copy_to), tuple(ami_users)
    field_at = variant.origins.get(FIELD, f"{where}: variant \"{variant.name}\": {FIELD}")
    kms_at = variant.origins.get("kms_key_id", f"{where}: variant \"{variant.name}\": kms_key_id")
    targets = tuple(dict.fromkeys((*regions, *file_regions, *copy_to)))
    if variant.region_kms_key_ids and not variant.encrypted:
        raise SpecError(f"{field_at}: keys are named but encrypted is false; set encrypted = true or drop {FIELD}")
    for region, key in variant.region_kms_key_ids.items():
        label = f"{field_at}[\"{region}\"]"
        if region not in known_regions:
            raise SpecError(f"{label}: {region!r} is not an AWS region")
        if region not in targets:
            raise SpecError(f"{label}: {region} is not a region of this pipeline ({', '.join(targets)}); "
                            "add it to pipeline.copy_to or drop the entry")
        if key and not (_ARN.match(key) or _ALIAS.match(key) or _KEY_ID.match(key)):
            raise SpecError(f"{label} {key[:80]!r}: a KMS key ARN, key id or alias/NAME, e.g. "
                            f"arn:aws:kms:{region}:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    keys = region_keys(variant, regions, copy_to)
    for region, key in keys.items():
        match = _ARN.match(key)
        partition = partitions.get(region)
        if match and partition and match.group(1) != partition:
            label = f"{field_at}[\"{region}\"]" if region in variant.region_kms_key_ids else kms_at
            raise SpecError(f"{label}: key {key} is an ARN of the {match.group(1)} partition, but {region} is in "
                            f"{partition}: write it arn:{partition}:kms:{key.split(':', 3)[3]}")
        owner = key_region(key)
        if owner and owner != region:
            label = f"{field_at}[\"{region}\"]" if region in variant.region_kms_key_ids else kms_at
            raise SpecError(f"{label}: key {key} belongs to {owner}, but it would encrypt the image in {region}; "
                            f"a KMS key works only in its own region: give a key of {region} "
                            f"({FIELD} = {{ \"{region}\" = \"arn:aws:kms:{region}:...\" }})")
    named = [r for r, k in keys.items() if not is_default_key(k)]
    keyless = next((r for r, k in keys.items() if not k), None)
    if named and keyless is not None:
        kind = "copy_to" if keyless not in regions else "build"
        fix = (f"add \"{keyless}\" = \"arn:aws:kms:{keyless}:ACCOUNT:key/...\" to {FIELD}" if kind == "copy_to"
               else f"set kms_key_id, or add \"{keyless}\" to {FIELD}")
        verb = "has" if len(named) == 1 else "have"
        raise SpecError(f"{field_at if variant.region_kms_key_ids else kms_at}: encrypted {kind} region {keyless} "
                        f"has no KMS key, while {', '.join(named)} {verb} one: Packer would encrypt the image in "
                        f"{keyless} with that region's default aws/ebs key; {fix} (or \"{DEFAULT_EBS_ALIAS}\" to "
                        "mean the default key)")
    if shared:
        default = [r for r, k in keys.items() if is_default_key(k)]
        if default:
            region = default[0]
            raise SpecError(
                f"{where}: pipeline.ami_users shares variant {variant.name!r}, whose image in {', '.join(default)} "
                f"would be encrypted with the AWS-managed key aws/ebs: other accounts cannot use that key (its key "
                f"policy cannot be changed), so they could not launch the image. Create a customer managed key in "
                f"each region, name it in kms_key_id / {FIELD} (e.g. {FIELD} = {{ \"{region}\" = "
                f"\"arn:aws:kms:{region}:ACCOUNT:key/...\" }}), and let the accounts use it "
                "(amibuild iam-policy --task share)")
