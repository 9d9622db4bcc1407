"""Allowed AMIs, as amibuild reasons about it: the criteria that admit a pipeline's images, and
whether an account's settings admit one image. Pure functions over gathered facts.

AWS's rule: an image of another account is allowed when any criterion admits it; a criterion
admits it when every condition it sets holds (a provider, a name pattern with ``*`` / ``?``, a
maximum age, a maximum time since deprecation); the account's own images are always allowed.
``disabled`` and ``audit-mode`` refuse nothing; ``enabled`` refuses what no criterion admits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Sequence

from amibuild.values import parse_iso_time, wildcard_match


@dataclass(frozen=True)
class Criterion:
    """One ImageCriterion: every field it sets must hold."""

    providers: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    max_days_since_created: int | None = None
    max_days_since_deprecated: int | None = None

    def to_api(self) -> dict[str, Any]:
        """The ImageCriterion as ReplaceImageCriteriaInAllowedImagesSettings takes it."""
        out: dict[str, Any] = {}
        if self.providers:
            out["ImageProviders"] = list(self.providers)
        if self.names:
            out["ImageNames"] = list(self.names)
        if self.max_days_since_created is not None:
            out["CreationDateCondition"] = {"MaximumDaysSinceCreated": self.max_days_since_created}
        if self.max_days_since_deprecated is not None:
            out["DeprecationTimeCondition"] = {"MaximumDaysSinceDeprecated": self.max_days_since_deprecated}
        return out

    def label(self) -> str:
        parts = [f"providers {', '.join(self.providers)}" if self.providers else "",
                 f"names {', '.join(self.names)}" if self.names else "",
                 f"created within {self.max_days_since_created} d" if self.max_days_since_created is not None else "",
                 f"deprecated at most {self.max_days_since_deprecated} d ago"
                 if self.max_days_since_deprecated is not None else ""]
        return "; ".join(p for p in parts if p) or "(empty)"


def criterion_from_api(raw: Mapping[str, Any]) -> Criterion:
    return Criterion(
        tuple(raw.get("ImageProviders") or ()), tuple(raw.get("ImageNames") or ()),
        (raw.get("CreationDateCondition") or {}).get("MaximumDaysSinceCreated"),
        (raw.get("DeprecationTimeCondition") or {}).get("MaximumDaysSinceDeprecated"))


@dataclass(frozen=True)
class Settings:
    """GetAllowedImagesSettings of one account and region."""

    state: str  # disabled, audit-mode, enabled
    criteria: tuple[Criterion, ...] = ()


@dataclass(frozen=True)
class SeenImage:
    """The facts of an image the criteria look at."""

    image_id: str
    owner: str
    name: str
    creation_date: str = ""
    deprecation_time: str = ""


@dataclass(frozen=True)
class Admission:
    """Whether an account's settings admit an image, and why not."""

    allowed: bool  # the criteria admit it (whatever the state)
    refused: bool  # the state is enabled and they do not: a launch would fail
    reasons: tuple[str, ...] = ()  # per criterion, what it lacks


def lacks(criterion: Criterion, image: SeenImage, now: datetime) -> list[str]:
    """What ``criterion`` finds missing in ``image`` (empty: it admits the image)."""
    missing = []
    if criterion.providers and image.owner not in criterion.providers:
        missing.append(f"ImageProviders {', '.join(criterion.providers)} do not name the provider account "
                       f"{image.owner}")
    if criterion.names and not any(wildcard_match(image.name, p) for p in criterion.names):
        missing.append(f"ImageNames {', '.join(criterion.names)} do not match {image.name!r}")
    if criterion.max_days_since_created is not None:
        created = parse_iso_time(image.creation_date)
        if created is None or now - created > timedelta(days=criterion.max_days_since_created):
            missing.append(f"CreationDateCondition: created more than {criterion.max_days_since_created} d ago")
    if criterion.max_days_since_deprecated is not None and image.deprecation_time:
        deprecated = parse_iso_time(image.deprecation_time)
        if deprecated is not None and now - deprecated > timedelta(days=criterion.max_days_since_deprecated):
            missing.append(f"DeprecationTimeCondition: deprecated more than {criterion.max_days_since_deprecated} d ago")
    return missing


def admission(settings: Settings, image: SeenImage, account: str, now: datetime | None = None) -> Admission:
    """Whether ``account``'s ``settings`` admit ``image``."""
    now = now or datetime.now(timezone.utc)
    if image.owner == account:
        return Admission(True, False)
    reasons = []
    for number, criterion in enumerate(settings.criteria, 1):
        missing = lacks(criterion, image, now)
        if not missing:
            return Admission(True, False)
        reasons.append(f"criterion {number}: {'; '.join(missing)}")
    if not settings.criteria:
        reasons.append("no image criteria are set")
    return Admission(False, settings.state == "enabled", tuple(reasons))


# ------------------------------------------------------------------------- what admits a pipeline


MAX_NAMES = 50  # ImageNames per criterion, as AWS limits them


def pipeline_criteria(provider: str, prefixes: Sequence[str], *, max_days_since_created: int | None = None,
                      max_days_since_deprecated: int | None = None) -> tuple[Criterion, ...]:
    """The criteria for every prefix: one per 50 name patterns (AWS's limit per criterion)."""
    names = tuple(dict.fromkeys(f"{p}-*" for p in prefixes))  # PREFIX-*: Packer appends -{{timestamp}}
    chunks = [names[i:i + MAX_NAMES] for i in range(0, len(names), MAX_NAMES)] or [()]
    return tuple(Criterion((provider,), chunk, max_days_since_created, max_days_since_deprecated) for chunk in chunks)


def cli_commands(criteria: Sequence[Criterion], regions: Sequence[str]) -> list[str]:
    """The AWS CLI commands that apply ``criteria`` and enable them, per region. Replace swaps every
    criterion the account has: a consumer with criteria of its own adds ours to them."""
    body = json.dumps([c.to_api() for c in criteria], separators=(",", ":"))
    return [command for region in regions for command in (
        f"aws ec2 replace-image-criteria-in-allowed-images-settings --region {region} --image-criteria '{body}'",
        f"aws ec2 enable-allowed-images-settings --region {region} --allowed-images-settings-state audit-mode   # then: enabled",
    )]


_APPLY = """import boto3, cfnresponse
def handler(event, context):
    try:
        props = event["ResourceProperties"]
        criteria = props["ImageCriteria"]
        for criterion in criteria:  # CloudFormation passes numbers to a custom resource as text
            for condition in ("CreationDateCondition", "DeprecationTimeCondition"):
                for key, value in criterion.get(condition, {}).items():
                    criterion[condition][key] = int(value)
        ec2 = boto3.client("ec2")
        if event["RequestType"] != "Delete":
            ec2.replace_image_criteria_in_allowed_images_settings(ImageCriteria=criteria)
            ec2.enable_allowed_images_settings(AllowedImagesSettingsState=props["State"])
        cfnresponse.send(event, context, cfnresponse.SUCCESS, {})
    except Exception as exc:
        cfnresponse.send(event, context, cfnresponse.FAILED, {"Error": str(exc)})
"""


def cloudformation(criteria: Sequence[Criterion]) -> dict[str, Any]:
    """A template that applies the criteria in the region it is deployed to (CloudFormation has no
    resource type for Allowed AMIs: a custom resource calls the same two EC2 actions). Deploy it per
    consumer account and region, e.g. with a StackSet."""
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Allowed AMIs criteria that admit amibuild's images",
        "Parameters": {"State": {"Type": "String", "Default": "audit-mode", "AllowedValues": ["audit-mode", "enabled"]}},
        "Resources": {
            "ApplyRole": {"Type": "AWS::IAM::Role", "Properties": {
                "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
                "ManagedPolicyArns": [{"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"}],
                "Policies": [{"PolicyName": "allowed-amis", "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Resource": "*",
                    "Action": ["ec2:ReplaceImageCriteriaInAllowedImagesSettings", "ec2:EnableAllowedImagesSettings"]}]}}]}},
            "ApplyFunction": {"Type": "AWS::Lambda::Function", "Properties": {
                "Runtime": "python3.12", "Handler": "index.handler", "Timeout": 60,
                "Role": {"Fn::GetAtt": ["ApplyRole", "Arn"]}, "Code": {"ZipFile": _APPLY}}},
            "AllowedImages": {"Type": "Custom::AllowedImagesSettings", "Properties": {
                "ServiceToken": {"Fn::GetAtt": ["ApplyFunction", "Arn"]}, "State": {"Ref": "State"},
                "ImageCriteria": [c.to_api() for c in criteria]}},
        },
    }
