"""The requests (flags) of the fleet, karpenter, verify, sbom, diff, scan and allowed-amis tasks.
Their bodies: `amibuild.jobs.view_commands`."""

from dataclasses import dataclass

from amibuild import values
from amibuild.request import JSON_HELP, K8S_HELP, flag, like
from amibuild.jobs.requests_build import Output


@dataclass(frozen=True)
class FleetRequest:
    """`amibuild fleet`."""

    variant: str | None = flag("Only consumers and channels of this variant (default: every one)")
    channel: str | None = flag("Only this channel (default: every one)")
    region: str | None = flag("Only this region (default: every target region of the pipeline)")
    json: bool = flag("Print the view as JSON on stdout", False)
    markdown: bool = flag("Print the view as a Markdown summary on stdout (as written to $GITHUB_STEP_SUMMARY)",
                          False)
    check_behind: str | None = flag("Exit 1, naming them, when any consumer is more than N versions (or Nd days) "
                                    "behind its channel, or orphaned: for a scheduled CI job")
    verify: bool = flag("Check the signed provenance of every running image; mark each without valid provenance "
                        "from this pipeline (an image nobody built through it) and exit 1 naming them", False)
    pipeline: str | None = flag("Pipeline file (default: amibuild.hcl in the current folder or above)")
    profile: str | None = like(Output, "profile")


@dataclass(frozen=True)
class KarpenterRequest:
    """`amibuild karpenter`."""

    variant: str | None = flag("Variant whose channel the node class follows (default: the pipeline's only "
                                "variant)")
    channel: str | None = flag("Channel to follow, e.g. stable (required)")
    name: str | None = flag("The EC2NodeClass's name (default: VARIANT-CHANNEL)")
    role: str | None = flag("IAM role of the nodes (default: KarpenterNodeRole-CLUSTER, unless --instance-profile)")
    instance_profile: str | None = flag("Instance profile of the nodes, instead of --role")
    cluster: str | None = flag("Cluster name, for the discovery tag (default: the pipeline's name)")
    discovery: str | None = flag("Value of the karpenter.sh/discovery tag selecting subnets and security groups "
                                 "(default: the cluster)")
    region: str | None = flag("Region whose channel parameter to check (default: the pipeline's build region)")
    proxy: str = flag("HTTP(S) proxy for the nodes (in the user data: AL2023 NodeConfig environment, AL2 boothook)",
                      "")
    no_proxy: tuple[str, ...] = flag("Extra NO_PROXY entry (repeatable or comma-separated; with --proxy)",
                                     repeat=True)
    proxy_credentials_parameter: str = flag(
        "SSM SecureString (user:password) the nodes read at boot for --proxy, whose URL then has no credentials; "
        "the node role must be allowed to read it (default: the variant's proxy { credentials_parameter })", "")
    vpc_cidr: tuple[str, ...] = flag("The VPC's CIDR, for NO_PROXY (repeatable; with --proxy on AL2023)",
                                     repeat=True)
    service_cidr: str = flag("Cluster service CIDR, for NO_PROXY (default: both EKS defaults)", "")
    kubelet_flag: tuple[str, ...] = flag("Extra kubelet flag --name=value (repeatable; AL2023: NodeConfig "
                                         "spec.kubelet.flags)", repeat=True)
    max_pods_expression: str = flag("Refused here: Karpenter's own NodeConfig sets maxPods, which wins over the "
                                    "expression (use the EC2NodeClass's spec.kubelet.maxPods or podsPerCore)", "")
    json: bool = flag("Print the manifest as JSON instead of YAML", False)
    pipeline: str | None = like(FleetRequest, "pipeline")
    profile: str | None = like(Output, "profile")


@dataclass(frozen=True)
class VerifyRequest:
    """`amibuild verify`."""

    ami: str | None = flag("An image to verify (in --region, default: the pipeline's build region), instead of a "
                           "channel")
    variant: str | None = flag("Variant whose channel to verify (with --channel)")
    channel: str | None = flag("Channel to verify, e.g. stable (every target region, or --region)")
    region: str | None = flag("Only this region (default: every target region of the pipeline)")
    k8s: str | None = flag(K8S_HELP)
    json: bool = flag("Print the same as JSON on stdout", False)
    pipeline: str | None = like(FleetRequest, "pipeline")
    profile: str | None = like(Output, "profile")


@dataclass(frozen=True)
class ImageRequest:
    """The flags sbom, diff and scan share."""

    variant: str | None = flag("Variant whose image this is (default: the pipeline's only variant)")
    k8s: str | None = flag(K8S_HELP)
    pipeline: str | None = like(FleetRequest, "pipeline")
    profile: str | None = like(Output, "profile")
    json: bool = flag(JSON_HELP, False)


@dataclass(frozen=True)
class SbomRequest(ImageRequest):
    """`amibuild sbom`."""

    channel: str | None = flag("Channel whose image (in the build region) to show, e.g. stable")
    ami: str | None = flag("An image id (in the build region), instead of a channel")
    format: str = flag("cyclonedx (default: the stored CycloneDX 1.5 JSON), spdx (SPDX 2.3 JSON) or table",
                       "cyclonedx")


@dataclass(frozen=True)
class DiffRequest(ImageRequest):
    """`amibuild diff`."""

    from_: str | None = flag("The older image: a channel, an AMI id or a build-ami run id", name="from")
    to: str | None = flag("The newer image: a channel, an AMI id or a build-ami run id")
    markdown: bool = flag("Print the same as Markdown (release notes, $GITHUB_STEP_SUMMARY)", False)


@dataclass(frozen=True)
class ScanRequest(ImageRequest):
    """`amibuild scan`."""

    channel: str | None = flag("Channel whose image to scan (its policy, if its block has `scan`, says pass or "
                               "refuse)")
    ami: str | None = flag("An image id (in the build region), instead of a channel")


def _days(value, flag):
    return None if value in (None, "") else values.count(value, flag, minimum=0, maximum=36500, example=180)


@dataclass(frozen=True)
class AllowedAmisRequest:
    """`amibuild allowed-amis`."""

    provider: str = flag("The build account's id, the image provider the criteria name (default: the caller's "
                         "account)", "")
    max_days_since_created: int | None = flag("Also require images younger than this many days "
                                              "(CreationDateCondition)", cast=_days)
    max_days_since_deprecated: int | None = flag("Also refuse images deprecated more than this many days ago "
                                                 "(DeprecationTimeCondition)", cast=_days)
    json: bool = flag("Print the criteria, the CLI commands and the CloudFormation template as JSON", False)
    pipeline: str | None = like(FleetRequest, "pipeline")
    profile: str | None = flag("AWS profile of the build account (default: AWS_PROFILE / the standard chain)")
