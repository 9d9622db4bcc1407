"""Least-privilege IAM policies for amibuild's tasks: what each one (and Packer under it) calls.

One concept over ~500 lines: the task table of rights, each task's statements beside the others so
that what one task may do is read against the rest.

`policy(task, pipeline, ...)` returns an IAM policy document for one task or ``all`` of them (``all``
without stacks and node role: rollout on every stack and no iam:PassRole, which `notes` says).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping, Sequence

from amibuild import secrets, tags
from amibuild.attest import store as attest_store
from amibuild.errors import SpecError
from amibuild.lease import lease_root
from amibuild.channels.publish import name_pattern
from amibuild.pipeline.validation import partition_dns_suffixes

TASKS = ("build", "publish", "rollout", "prune", "fleet", "test", "verify", "scan")
PUBLIC_EKS_PARAMETERS = "/aws/service/eks/optimized-ami/*"

_ON_BEHALF = ("CloudFormation calls it with the caller's permissions while it applies the change set to the "
              "stack's launch template and Auto Scaling group (no service role); the emulator's CloudFormation "
              "checks no permission and sends nothing through the proxy")

_CLEARED = ("called only for a channel's image that has a deprecation time while its variant sets no deprecate_after; "
            "tests/test_protection.py drives that path")

# Needed on real AWS, never requested in the emulated tests; the IAM test allows exactly these as
# "not observed here".
NOT_OBSERVED: Mapping[str, Mapping[str, str]] = {
    "build": {
        "ec2:DescribeRegions": "Packer validates the build and copy regions with DescribeRegions on real AWS; "
                               "amibuild renders skip_region_validation = true only for an endpoint override",
        "ssm:GetParameterHistory": "read only when another writer moved a channel while build-ami published "
                                   "(the conflict check); tests/test_publish.py drives that path",
        "ssm:ListTagsForResource": "read only when the channel exists already (the regions it is recorded in); "
                                   "the build test publishes a new channel, tests/test_channel_converge.py reads it",
        "kms:CreateGrant": "EC2 uses the caller's KMS permissions for an encrypted copy with a KMS key; "
                           "no request of amibuild's or Packer's to observe",
        "kms:Decrypt": "as kms:CreateGrant",
        "kms:GenerateDataKeyWithoutPlaintext": "as kms:CreateGrant",
        "kms:ReEncryptFrom": "as kms:CreateGrant",
        "kms:ReEncryptTo": "as kms:CreateGrant",
        "ec2:DisableImageDeprecation": _CLEARED,
    },
    "publish": {"ec2:DisableImageDeprecation": _CLEARED},
    "verify": {},
    "scan": {},
    "test": {
        "iam:PassRole": "an authorization check on the instance profile's role when RunInstances hands it to the "
                        "instance; not an API request",
        "eks:DescribeCluster": "called only with --cluster or test { cluster } (the joining node's user data), "
                               "which tests/test_boot_rest.py runs against the emulated cluster",
    },
    "rollout": {
        "iam:PassRole": "an authorization check on the node role when CloudFormation or Auto Scaling hands it "
                        "to instances; not an API request",
        "eks:DescribeCluster": "called by `amibuild nodegroup-deploy`, not by the rollout this test drives; "
                               "tests/test_today_nodes.py runs nodegroup-deploy against the emulator's cluster",
        **dict.fromkeys(("ssm:GetParameters", "ec2:DescribeLaunchTemplates", "autoscaling:DescribeScalingActivities",
                         "autoscaling:UpdateAutoScalingGroup", "autoscaling:SuspendProcesses",
                         "autoscaling:ResumeProcesses", "autoscaling:TerminateInstanceInAutoScalingGroup",
                         "ec2:RunInstances"), _ON_BEHALF),
    },
    "prune": {
        "ec2:EnableImageDeprecation": "the emulator does not implement image deprecation (HTTP 500); "
                                      "tests/test_prune.py replays EC2's answer on the gateway's client",
        "eks:DescribeNodegroup": "read for each managed node group; the prune policy test's account has none "
                                 "(the fleet policy test seeds one and sees it called)",
        **dict.fromkeys(("ec2:DisableImage", "ec2:DescribeImageAttribute"),
                        "only with --disable-after (tests/test_prune_ladder.py runs it against the emulator)"),
    },
    "fleet": {},
}

# Allowed to every caller whatever the policy says: never listed, ignored when seen.
ALWAYS_ALLOWED = frozenset({"sts:GetCallerIdentity"})

_STACK = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}\Z")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::([0-9]{12}):role/[A-Za-z0-9_+=,.@/-]{1,512}\Z")
_ACCOUNT = re.compile(r"^(\*|[0-9]{12})\Z")
_KMS_ARN = re.compile(r"^arn:aws[a-z-]*:kms:")


def policy(
    task: str,
    pipeline: Any,
    *,
    stacks: Sequence[str] = (),
    node_role_arn: str | None = None,
    account: str = "*",
    partition: str = "aws",
) -> dict[str, Any]:
    """The policy document for `task` (one of `TASKS`, or ``all``) of `pipeline`."""
    if task not in (*TASKS, "all"):
        raise SpecError(f"--task {task!r}: one of {', '.join(TASKS)} or all (or share, for the KMS keys of shared images)")
    if not _ACCOUNT.match(account or ""):
        raise SpecError(f"--account {account!r}: a 12-digit account id (default: * for any account)")
    if not re.match(r"^aws[a-z-]*\Z", partition or ""):
        raise SpecError(f"--partition {partition!r}: aws, aws-cn or aws-us-gov")
    tasks = TASKS if task == "all" else (task,)
    if "rollout" in tasks and not (task == "all" and not stacks and not node_role_arn):
        _check_rollout(task, stacks, node_role_arn)
    arn = _Arns(partition, account, pipeline)
    merged: dict[str, dict[str, Any]] = {}
    for name in tasks:
        for statement in [*_STATEMENTS[name](arn, pipeline, tuple(stacks), node_role_arn), *_events(arn, pipeline, name)]:
            _merge(merged, statement)
    return {"Version": "2012-10-17", "Statement": list(merged.values())}


def actions(document: Mapping[str, Any]) -> set[str]:
    """Every action a policy document allows."""
    return {action for statement in document["Statement"]
            for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])}


def to_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"


# ------------------------------------------------------------------------------- building blocks


class _Arns:
    def __init__(self, partition: str, account: str, pipeline: Any) -> None:
        self.p, self.a = partition, account
        self.dns = partition_dns_suffixes().get(partition, "amazonaws.com")  # services' names: ec2.REGION.<dns>
        parameter = f"arn:{partition}:ssm:*:{account}:parameter"
        root = lease_root(pipeline.ssm_prefix, pipeline.name)
        # GetParametersByPath is authorized on the path itself, everything else on the names below it
        self.channels = [f"{parameter}{name_pattern(pipeline)[0].rstrip('/')}{tail}" for tail in ("", "/*")]
        # every lease (amibuild.lease) lives under the pipeline's _leases folder, whatever the name template
        self.leases = [f"{parameter}{root}/*"]
        self.lease_folders = [f"{parameter}{root}{tail}" for tail in ("", "/*")]  # as `channels`
        self.public_eks = [f"arn:{partition}:ssm:*::parameter{PUBLIC_EKS_PARAMETERS}"]
        self.any_kms_key = [f"arn:{partition}:kms:*:{account}:key/*"]

    def stacks(self, names: Iterable[str]) -> list[str]:
        return [f"arn:{self.p}:cloudformation:*:{self.a}:stack/{name}/*" for name in names]

    def kms_keys(self, keys: Iterable[str]) -> list[str]:
        return [k if _KMS_ARN.match(k) else f"arn:{self.p}:kms:*:{self.a}:key/{k}" for k in keys]


def _statement(sid: str, actions: Iterable[str], resources: Sequence[str] | str = "*",
               condition: Mapping[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": sorted(set(actions)),
                            "Resource": resources if isinstance(resources, str) else list(resources)}
    if condition:
        body["Condition"] = dict(condition)
    return body


def _merge(merged: dict[str, dict[str, Any]], statement: dict[str, Any]) -> None:
    """Statements with one Sid have one resource and condition by construction: union their actions."""
    sid = statement["Sid"]
    if sid not in merged:
        merged[sid] = statement
        return
    same = merged[sid]
    assert (same["Resource"], same.get("Condition")) == (statement["Resource"], statement.get("Condition")), sid
    same["Action"] = sorted(set(same["Action"]) | set(statement["Action"]))


def _check_rollout(task: str, stacks: Sequence[str], node_role_arn: str | None) -> None:
    """Every missing or bad rollout flag, named in one error."""
    missing = ([] if stacks else ["--stack NAME (repeatable: the nodegroup stacks it may change)"]) + \
        ([] if node_role_arn else ["--node-role-arn ARN (the node role, the only role iam:PassRole is allowed for, "
                                   "e.g. arn:aws:iam::123456789012:role/eks-nodes)"])
    bad = [f"--stack {name!r}: a CloudFormation stack name (letters, digits, '-')"
           for name in stacks if not _STACK.match(name)]
    if node_role_arn and not _ROLE_ARN.match(node_role_arn):
        bad.append(f"--node-role-arn {node_role_arn!r}: the node role's ARN, "
                   "e.g. arn:aws:iam::123456789012:role/eks-nodes (iam:PassRole is allowed for it only)")
    if missing:
        bad.insert(0, f"iam-policy --task {task} needs {' and '.join(missing)}"
                   + ("; or choose another --task" if task == "rollout" else ""))
    if bad:
        raise SpecError("; ".join(bad))


# ------------------------------------------------------------------------------- per task


def _build(arn: _Arns, pipeline: Any, stacks: tuple[str, ...], role: str | None) -> list[dict[str, Any]]:
    variants = tuple(pipeline.variants)
    shared = bool(pipeline.ami_users)
    encrypted = any(v.encrypted or v.kms_key_id for v in variants)
    # every region's key: a copy is encrypted with its region's (region_kms_key_ids)
    keys = sorted({k for v in variants for k in (v.kms_key_id, *v.region_kms_key_ids.values()) if k})
    describe = {"ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeVolumes", "ec2:DescribeSecurityGroups",
                "ec2:DescribeRegions"}
    if any(v.subnet_id for v in variants):
        describe.add("ec2:DescribeSubnets")
    if shared:
        describe |= {"ec2:DescribeImageAttribute", "ec2:DescribeSnapshotAttribute"}
    packer = {"ec2:RunInstances", "ec2:StopInstances", "ec2:TerminateInstances", "ec2:CreateKeyPair",
              "ec2:DeleteKeyPair", "ec2:CreateImage", "ec2:CreateTags", "ec2:ModifyImageAttribute"}
    if not variants or any(not v.security_group_id for v in variants):
        packer |= {"ec2:CreateSecurityGroup", "ec2:AuthorizeSecurityGroupIngress", "ec2:DeleteSecurityGroup"}
    if pipeline.copy_to or encrypted:
        packer.add("ec2:CopyImage")
    if shared:
        packer.add("ec2:ModifySnapshotAttribute")
    if encrypted:
        # the unencrypted intermediate image and its snapshot, removed after the encrypted copy
        packer |= {"ec2:DeregisterImage", "ec2:DeleteSnapshot"}
    statements = [
        _statement("Ec2Describe", describe),
        _statement("PackerBuild", packer),
        _statement("EksPublicParameters", ["ssm:GetParameters"], arn.public_eks),
        _statement("ChannelsRead", ["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParameterHistory",
                                    "ssm:GetParametersByPath", "ssm:ListTagsForResource"], arn.channels),
        _channel_safeguards(arn, pipeline),
        *_channel_writes(arn),
        # before building: the channel's parameters found by their tags, to refuse one grown beyond
        # the pipeline's regions (DescribeParameters, metadata only, cannot be scoped)
        _statement("ChannelsFind", ["ssm:DescribeParameters"]),
    ]
    # the upstream base lists the Kubernetes binaries bucket for 1.N.P and its build date (as
    # upstream's `make k8s=1.N` does); a variant may point at its own mirror
    buckets = sorted({str(v.packer_vars.get("binary_bucket_name") or "amazon-eks")
                      for v in variants if v.base == "upstream"})
    if buckets:
        statements.append(_statement("EksBinariesList", ["s3:ListBucket"], [f"arn:{arn.p}:s3:::{b}" for b in buckets]))
    # KMS authorizes on the key, never on an alias: an alias becomes a condition on any key
    aliases = sorted(k.split(":", 5)[-1] if _KMS_ARN.match(k) else k for k in keys if "alias/" in k)
    key_ids = [k for k in keys if "alias/" not in k]
    kms = ["kms:CreateGrant", "kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext",
           "kms:ReEncryptFrom", "kms:ReEncryptTo"]
    via_ec2 = {"StringLike": {"kms:ViaService": f"ec2.*.{arn.dns}"}}
    if key_ids:
        statements.append(_statement("KmsForEncryptedImages", kms, arn.kms_keys(key_ids), via_ec2))
    if aliases:
        statements.append(_statement("KmsForEncryptedImagesByAlias", kms, arn.any_kms_key,
                                     {**via_ec2, "ForAnyValue:StringEquals": {"kms:ResourceAliases": aliases}}))
    statements += _fingerprint_mac(arn, pipeline)
    return statements + _attest(arn, pipeline)  # each built variant's provenance statement


def _key_resources(arn: _Arns, key: str) -> tuple[list[str], dict[str, Any] | None]:
    """The resources (and condition) IAM authorizes a call on the pipeline's key with."""
    if "alias/" in key:  # KMS authorizes on the key: an alias becomes a condition on any key
        alias = key.split(":", 5)[-1] if _KMS_ARN.match(key) else key
        return arn.any_kms_key, {"ForAnyValue:StringEquals": {"kms:ResourceAliases": [alias]}}
    return arn.kms_keys([key]), None


def _attest_verify(arn: _Arns, pipeline: Any) -> list[dict[str, Any]]:
    """Verifying the pipeline's statements: its key's public key, and its own prefix of the bucket."""
    settings = pipeline.attestation
    bucket = f"arn:{arn.p}:s3:::{settings.bucket or attest_store.default_bucket(arn.a)}"
    prefix = attest_store.pipeline_prefix(pipeline.name)
    statements = []
    if settings.kms_key:
        statements.append(_statement("AttestationVerify", ["kms:DescribeKey", "kms:GetPublicKey"],
                                     *_key_resources(arn, settings.kms_key)))
    return statements + [_statement("AttestationRead", ["s3:GetObject"], [f"{bucket}/{prefix}*"]),
                         _statement("AttestationList", ["s3:ListBucket"], [bucket],
                                    {"StringLike": {"s3:prefix": [f"{prefix}*"]}})]


def _verify(arn: _Arns, pipeline: Any, stacks: tuple[str, ...], role: str | None) -> list[dict[str, Any]]:
    return [_statement("Ec2Describe", ["ec2:DescribeImages"]),
            _statement("ChannelsRead", ["ssm:GetParameter"], arn.channels),
            _statement("EksPublicParameters", ["ssm:GetParameters"], arn.public_eks),  # today's render's source AMI
            *_attest_verify(arn, pipeline)]


def _scan(arn: _Arns, pipeline: Any, stacks: tuple[str, ...], role: str | None) -> list[dict[str, Any]]:
    """`amibuild scan` (and `sbom`, `diff`; `build-ami --scan` on top of build): the signed SBOM read
    as verify reads, ScanSbom (Inspector Scan has no resources to scope it to), the scan statement
    signed and stored under the pipeline's prefix, the channel's history for AWS's time."""
    return [_statement("Ec2Describe", ["ec2:DescribeImages"]),
            _statement("ChannelsRead", ["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParameterHistory"],
                       arn.channels),
            _statement("InspectorScan", ["inspector-scan:ScanSbom"]),
            *_attest_verify(arn, pipeline), *_attest(arn, pipeline)]


def _attest(arn: _Arns, pipeline: Any) -> list[dict[str, Any]]:
    """Signed statements (`amibuild.attest`): the pipeline's key signs (DescribeKey, Sign), and only
    this pipeline's prefix of the statements bucket is written."""
    settings = pipeline.attestation
    statements = []
    if settings.kms_key:
        statements.append(_statement("AttestationSign", ["kms:DescribeKey", "kms:Sign"],
                                     *_key_resources(arn, settings.kms_key)))
    bucket = settings.bucket or attest_store.default_bucket(arn.a)
    statements.append(_statement("AttestationStore", ["s3:PutObject"],
                                 [f"arn:{arn.p}:s3:::{bucket}/{attest_store.pipeline_prefix(pipeline.name)}*"]))
    return statements


def _fingerprint_mac(arn: _Arns, pipeline: Any) -> list[dict[str, Any]]:
    """kms:GenerateMac on the fingerprint key, when a variant's URLs carry credentials (its MAC
    stands for them in the fingerprint: amibuild.bake.credential_macs)."""
    key = getattr(pipeline, "fingerprint_key", "")
    carrying = any(secrets.has_credentials([v.proxy.http, v.proxy.https, [[r.baseurl, r.gpgkey] for r in v.repos],
                                            [v.packer_vars.get(n) for n in ("http_proxy", "https_proxy", "extra_repos")]])
                   for v in pipeline.variants)
    if not key or not carrying:
        return []
    return [_statement("FingerprintMac", ["kms:GenerateMac"], *_key_resources(arn, key))]


def _publish(arn: _Arns, pipeline: Any, stacks: tuple[str, ...], role: str | None) -> list[dict[str, Any]]:
    # a gate checks the signed statements (test or scan)
    gated = any({"tested", "scanned"} & set(g.requires) for g in pipeline.gates.values())
    return [
        *(_attest_verify(arn, pipeline) if gated else []),
        _statement("Ec2Describe", ["ec2:DescribeImages"]),
        _statement("ChannelsRead", ["ssm:GetParameter", "ssm:GetParameterHistory", "ssm:GetParametersByPath",
                                    "ssm:ListTagsForResource"], arn.channels),
        *_channel_writes(arn),
        _channel_safeguards(arn, pipeline),
    ]


def _channel_writes(arn: _Arns) -> list[dict[str, Any]]:
    """A channel's write, and the lease every channel write holds (`amibuild.lease`)."""
    return [_statement("ChannelsWrite", ["ssm:PutParameter", "ssm:AddTagsToResource", "ssm:DeleteParameter"],
                       arn.channels),
            _statement("ChannelLeases", ["ssm:PutParameter", "ssm:DeleteParameter", "ssm:GetParameter",
                                          "ssm:GetParameterHistory"], arn.leases)]


def _channel_safeguards(arn: _Arns, pipeline: Any) -> dict[str, Any]:
    """What every channel write does to the images the channels hold (`amibuild.channels.safeguard`):
    deregistration protection on, and their deprecation time moved (with ``deprecate_after``) or cleared;
    only on images whose ``amibuild:pipeline`` tag names the pipeline."""
    actions = ["ec2:EnableImageDeregistrationProtection", "ec2:DisableImageDeprecation"]
    if any(getattr(v, "deprecate_after", None) for v in pipeline.variants):
        actions.append("ec2:EnableImageDeprecation")
    return _statement("ChannelImageSafeguards", actions, [f"arn:{arn.p}:ec2:*::image/*"],
                      {"StringEquals": {f"aws:ResourceTag/{tags.PIPELINE}": pipeline.name}})


def _consumers(arn: _Arns, pipeline: Any, stacks: tuple[str, ...] = (), role: str | None = None) -> list[dict[str, Any]]:
    """What fleet reads, and prune too (`amibuild.lifecycle.consumers`): every channel and everything that runs an image."""
    return [
        _statement("Ec2Describe", ["ec2:DescribeImages", "ec2:DescribeInstances",
                                   "ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions"]),
        _statement("AutoScalingDescribe", ["autoscaling:DescribeAutoScalingGroups",
                                           "autoscaling:DescribeLaunchConfigurations"]),
        # node group stacks and managed node groups: which image each runs
        _statement("StacksDescribe", ["cloudformation:DescribeStacks"]),
        _statement("NodegroupsDescribe", ["eks:ListClusters", "eks:ListNodegroups", "eks:DescribeNodegroup"]),
        _statement("ChannelsRead", ["ssm:GetParametersByPath", "ssm:GetParameterHistory"], arn.channels),
        # every channel amibuild wrote for this pipeline, found by its tags whatever template named it
        _statement("ChannelsFind", ["ssm:DescribeParameters"]),
        _statement("ChannelsReadByTag", ["ssm:GetParameterHistory"], [f"arn:{arn.p}:ssm:*:{arn.a}:parameter/*"],
                   {"StringEquals": {f"ssm:resourceTag/{tags.PIPELINE}": pipeline.name}}),
    ]


def _prune(arn: _Arns, pipeline: Any, stacks: tuple[str, ...], role: str | None) -> list[dict[str, Any]]:
    return [
        *_consumers(arn, pipeline),
        _statement("Ec2DescribeSnapshots", ["ec2:DescribeSnapshots"]),
        # each channel's current value, read again right before a deregister (amibuild.lifecycle.exclusive)
        _statement("ChannelsReadNow", ["ssm:GetParameter"], arn.channels),
        _statement("ChannelsReadNowByTag", ["ssm:GetParameter"], [f"arn:{arn.p}:ssm:*:{arn.a}:parameter/*"],
                   {"StringEquals": {f"ssm:resourceTag/{tags.PIPELINE}": pipeline.name}}),
        # the prune lease, and the channel leases it waits out
        _statement("PruneLease", ["ssm:PutParameter", "ssm:DeleteParameter", "ssm:GetParameter",
                                  "ssm:GetParameterHistory", "ssm:GetParametersByPath"], arn.lease_folders),
        _statement("PruneOwnImages", ["ec2:DeregisterImage", "ec2:DeleteSnapshot", "ec2:EnableImageDeprecation"],
                   [f"arn:{arn.p}:ec2:*::image/*", f"arn:{arn.p}:ec2:*::snapshot/*"],
                   {"StringEquals": {f"aws:ResourceTag/{tags.PIPELINE}": pipeline.name}}),
        # the lifecycle ladder: protection off before a deregister, --disable-after, and whether the
        # Recycle Bin will keep what prune deletes (its rules) and whom an image is shared with
        _statement("PruneLadder", ["ec2:DisableImageDeregistrationProtection", "ec2:DisableImage"],
                   [f"arn:{arn.p}:ec2:*::image/*"],
                   {"StringEquals": {f"aws:ResourceTag/{tags.PIPELINE}": pipeline.name}}),
        _statement("PruneLadderReads", ["ec2:DescribeImageAttribute", "rbin:ListRules", "rbin:GetRule"]),
    ]


def _rollout(arn: _Arns, pipeline: Any, stacks: tuple[str, ...], role: str | None) -> list[dict[str, Any]]:
    # no stacks named (bare `--task all`): every stack, groups any stack made, and no iam:PassRole (`notes`)
    stack_tag = ({"StringEquals": {"aws:ResourceTag/aws:cloudformation:stack-name": list(stacks)}} if stacks
                 else {"Null": {"aws:ResourceTag/aws:cloudformation:stack-name": "false"}})
    return [
        _statement("Ec2Describe", ["ec2:DescribeImages", "ec2:DescribeLaunchTemplateVersions",
                                   "ec2:DescribeLaunchTemplates"]),
        _statement("AutoScalingDescribe", ["autoscaling:DescribeAutoScalingGroups",
                                           "autoscaling:DescribeScalingActivities"]),
        # GetParameters: CloudFormation resolves the stack's image parameter with the caller's rights
        _statement("ChannelsRead", ["ssm:GetParameter", "ssm:GetParameters"], arn.channels),
        _statement("NodegroupStacks", ["cloudformation:DescribeStacks", "cloudformation:ListStackResources",
                                       "cloudformation:GetTemplate", "cloudformation:CreateChangeSet",
                                       "cloudformation:DescribeChangeSet", "cloudformation:DeleteChangeSet",
                                       "cloudformation:ExecuteChangeSet", "cloudformation:DescribeStackEvents"],
                   arn.stacks(stacks or ["*"])),
        # a new launch template version: amibuild's own for a managed node group, CloudFormation's
        # (with the caller's rights) for a stack
        _statement("NodegroupLaunchTemplate", ["ec2:CreateLaunchTemplateVersion"],
                   [f"arn:{arn.p}:ec2:*:{arn.a}:launch-template/*"]),
        # what CloudFormation does with the caller's rights to roll the stack's group
        # (AutoScalingRollingUpdate), limited to groups the named stacks made
        _statement("NodegroupStackGroup", ["autoscaling:UpdateAutoScalingGroup", "autoscaling:SuspendProcesses",
                                           "autoscaling:ResumeProcesses",
                                           "autoscaling:TerminateInstanceInAutoScalingGroup"],
                   [f"arn:{arn.p}:autoscaling:*:{arn.a}:autoScalingGroup:*:autoScalingGroupName/*"], stack_tag),
        # Auto Scaling checks that whoever points a group at a launch template may launch from it
        _statement("NodegroupLaunch", ["ec2:RunInstances"]),
        _statement("Nodegroups", ["eks:DescribeNodegroup", "eks:UpdateNodegroupVersion", "eks:DescribeUpdate"],
                   [f"arn:{arn.p}:eks:*:{arn.a}:cluster/*", f"arn:{arn.p}:eks:*:{arn.a}:nodegroup/*/*/*"]),
        # nodegroup-deploy reads the cluster (al2023 NodeConfig, endpoint access for NO_PROXY,
        # authentication mode); `aws-auth --access-entry` gives the node role access (or reads the type of its entry)
        _statement("NodeClusterAccess", ["eks:DescribeCluster", "eks:CreateAccessEntry", "eks:DescribeAccessEntry"],
                   [f"arn:{arn.p}:eks:*:{arn.a}:cluster/*", f"arn:{arn.p}:eks:*:{arn.a}:access-entry/*"]),
    ] + ([_statement("PassNodeRole", ["iam:PassRole"], [role],
                      {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "eks.amazonaws.com"]}})]
         if role else [])


def _test(arn: _Arns, pipeline: Any, stacks: tuple[str, ...], role: str | None) -> list[dict[str, Any]]:
    statements = [
        _statement("Ec2Describe", ["ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus"]),
        # RunInstances authorizes on every resource it touches: what it launches from, unconditioned ...
        _statement("BootTestLaunchFrom", ["ec2:RunInstances"],
                   [f"arn:{arn.p}:ec2:*::image/*", f"arn:{arn.p}:ec2:*:{arn.a}:subnet/*",
                    f"arn:{arn.p}:ec2:*:{arn.a}:security-group/*", f"arn:{arn.p}:ec2:*:{arn.a}:network-interface/*"]),
        # ... and what it makes, only with the run id tag from launch
        _statement("BootTestLaunchTagged", ["ec2:RunInstances"],
                   [f"arn:{arn.p}:ec2:*:{arn.a}:instance/*", f"arn:{arn.p}:ec2:*:{arn.a}:volume/*"],
                   {"Null": {f"aws:RequestTag/{tags.RUN_ID}": "false"},
                    "ForAllValues:StringLike": {"aws:TagKeys": ["amibuild:*", "Name"]}}),
        _statement("BootTestTagOnLaunch", ["ec2:CreateTags"],
                   [f"arn:{arn.p}:ec2:*:{arn.a}:instance/*", f"arn:{arn.p}:ec2:*:{arn.a}:volume/*"],
                   {"StringEquals": {"ec2:CreateAction": "RunInstances"}}),
        _statement("BootTestTerminate", ["ec2:TerminateInstances"], [f"arn:{arn.p}:ec2:*:{arn.a}:instance/*"],
                   {"Null": {f"aws:ResourceTag/{tags.RUN_ID}": "false"}}),
        # the verdict on the pipeline's own images (amibuild:test, amibuild:tested-at, amibuild:test-run)
        _statement("BootTestResultTags", ["ec2:CreateTags"], [f"arn:{arn.p}:ec2:*::image/*"],
                   {"StringEquals": {f"aws:ResourceTag/{tags.PIPELINE}": pipeline.name}}),
        _statement("BootTestSsmRead", ["ssm:DescribeInstanceInformation", "ssm:GetCommandInvocation"]),
        _statement("ChannelsRead", ["ssm:GetParameter"], arn.channels),  # test-ami --channel
        _statement("BootTestRunShellScript", ["ssm:SendCommand"], [f"arn:{arn.p}:ssm:*::document/AWS-RunShellScript"]),
        _statement("BootTestRunOnTestInstances", ["ssm:SendCommand"], [f"arn:{arn.p}:ec2:*:{arn.a}:instance/*"],
                   {"Null": {f"ssm:resourceTag/{tags.RUN_ID}": "false"}}),
    ]
    settings = getattr(pipeline, "boot_test", None)
    # --cluster / test { cluster }: the cluster's endpoint, CA and service CIDR for the node's user data
    cluster = getattr(settings, "cluster", "") or "*"
    statements.append(_statement("BootTestCluster", ["eks:DescribeCluster"], [f"arn:{arn.p}:eks:*:{arn.a}:cluster/{cluster}"]))
    bucket = getattr(settings, "output_bucket", "")
    if bucket:  # test { output_bucket }: each check's whole output, its size and end read back
        statements.append(_statement("BootTestOutputRead", ["s3:GetObject"],
                                     [f"arn:{arn.p}:s3:::{bucket}/amibuild/boot-test/*"]))
    if profile := getattr(settings, "instance_profile", ""):
        role_name = getattr(settings, "role", "") or profile
        statements.append(_statement("BootTestPassRole", ["iam:PassRole"], [f"arn:{arn.p}:iam::{arn.a}:role/{role_name}"],
                                     {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}))
    # the booted image's signed provenance, read as verify reads it: another region's image is named only when it names it
    return statements + _attest_verify(arn, pipeline) + _attest(arn, pipeline)  # and the test statement


# the tasks that send amibuild's events (amibuild.notify): build-ami publishes and boot-tests, publish
# promotes and rolls back (gate refusals too), test-ami, prune deregisters
_SENDS_EVENTS = ("build", "publish", "test", "prune")


def _events(arn: _Arns, pipeline: Any, task: str) -> list[dict[str, Any]]:
    """PutEvents on the pipeline's bus, or Publish to its topic, for the tasks that send events."""
    target = getattr(pipeline, "events", None)
    if not target or task not in _SENDS_EVENTS:
        return []
    if target.sns_topic:
        return [_statement("SendEvents", ["sns:Publish"], [target.sns_topic])]
    bus = target.bus if target.bus.startswith("arn:") else f"arn:{arn.p}:events:*:{arn.a}:event-bus/{target.bus}"
    return [_statement("SendEvents", ["events:PutEvents"], [bus])]


def notes(task: str, pipeline: Any, *, stacks: Sequence[str] = (), node_role_arn: str | None = None,
          partition: str = "aws") -> list[str]:
    """What the policy for ``task`` assumes, for the user to check (printed on stderr, not in the document)."""
    settings = getattr(pipeline, "boot_test", None)
    profile = getattr(settings, "instance_profile", "")
    out = []
    if task == "all" and not stacks and not node_role_arn:
        out.append("the rollout statements allow every stack (no --stack) and no iam:PassRole (no --node-role-arn), "
                   "which a rollout needs for the node role: give --stack NAME and --node-role-arn ARN to name them")
    bucket = getattr(settings, "output_bucket", "")
    if task in ("test", "all") and bucket:
        out.append(f"the test instance's role needs s3:PutObject on arn:{partition}:s3:::{bucket}/amibuild/boot-test/* "
                   "(the SSM agent writes each check's output there)")
    if task in ("test", "all") and profile and not getattr(settings, "role", ""):
        out.append(f"iam:PassRole is for the role named {profile}, assumed to be the one in instance profile {profile} "
                   f"(as the console makes them); if it holds another, name it: pipeline {{ test {{ role = \"...\" }} }} "
                   f"(aws iam get-instance-profile --instance-profile-name {profile} shows it)")
    return out


_STATEMENTS = {"build": _build, "publish": _publish, "rollout": _rollout, "prune": _prune, "fleet": _consumers,
               "test": _test, "verify": _verify, "scan": _scan}
