"""The requests (flags) of the set-up and lifecycle tasks: init, doctor, prune, iam-policy, restore
(their bodies: `amibuild.jobs.setup_commands`)."""

from dataclasses import dataclass

from amibuild.request import flag, like
from amibuild.jobs.requests_build import Output, Selection


@dataclass(frozen=True)
class InitRequest:
    """`amibuild init`."""

    json: bool = flag("Print what was written as JSON on stdout", False)
    ci: str = flag("Also write a CI workflow for this repository: github (.github/workflows/amibuild.yml at the "
                   "repository root: nightly build-ami --boot-test, promote --due, channels --check)", "")
    here: bool = flag("Write the pipeline file here even though a parent folder of this repository has one "
                      "(commands run here then find this one)", False)


@dataclass(frozen=True)
class DoctorRequest:
    """`amibuild doctor` (its checks are `amibuild.jobs.doctor_job.checks`; with --consumer,
    `amibuild.handoff.consumer.ConsumerSettings`)."""

    pipeline: str | None = like(Selection, "pipeline")
    profile: str | None = like(Output, "profile")
    json: bool = flag("Print the checks as JSON on stdout", False)
    consumer: bool = flag("Check a consumer account instead (run with its credentials): its Allowed AMIs settings "
                          "admit the channel's images, block public access is on, the images and their keys are "
                          "usable", False)
    channel: str = flag("With --consumer: the channel whose images to check (default: the pipeline's default "
                        "channel)", "")
    build_profile: str = flag("With --consumer: the build account's AWS profile, to read the channel and the "
                              "images' launch permissions (default: the consumer's credentials)", "")


@dataclass(frozen=True)
class PruneRequest:
    """`amibuild prune` (its numbers and ages are checked in `amibuild.jobs.setup_commands.prune`)."""

    keep: str | None = flag("Images to keep per variant and region, newest first (required, at least 1)")
    older_than: str | None = flag("Also keep every image younger than this: 90m, 12h, 30d, 2w (default: no age "
                                  "limit)")
    keep_versions: str | None = flag("Also keep the images of this many earlier versions of every channel, for "
                                     "rollback (default 3)")
    dry_run: bool = flag("Print the plan, with the reason for every image kept, and change nothing", False)
    deprecate_only: bool = flag("Set a deprecation time on the images instead of deleting them and their snapshots",
                                False)
    variant: tuple[str, ...] = flag("Only images of this variant (repeatable; default: every variant amibuild "
                                    "tagged)", repeat=True)
    region: tuple[str, ...] = flag("Only this region (repeatable; default: every target region of the pipeline)",
                                   repeat=True)
    pipeline: str | None = like(Selection, "pipeline")
    profile: str | None = like(Output, "profile")
    json: bool = flag("Print the plan and what was done as JSON on stdout", False)
    disable_after: str | None = flag("Also disable (DisableImage) the images nothing uses that are older than this, "
                                     "e.g. 30d; shared images are skipped (default: disable none)")


@dataclass(frozen=True)
class IamPolicyRequest:
    """`amibuild iam-policy` (the policy itself is `amibuild.lifecycle.iam.policy`)."""

    task_: str = flag("Task the policy is for: build, publish (also promote, rollback, history, channels), "
                      "rollout, prune, fleet (describes only), test (test-ami, build-ami --boot-test), verify (verify, "
                      "fleet --verify with fleet), scan (scan, sbom, diff, build-ami --scan with build), or all "
                      "(default); or share: what the ami_users accounts need on each region's KMS key (not an IAM "
                      "policy)", "all", name="task")
    pipeline: str | None = like(Selection, "pipeline")
    stack: tuple[str, ...] = flag("Nodegroup stack the rollout may change (repeatable; required for rollout; all "
                                  "without it: every stack)", repeat=True)
    node_role_arn: str | None = flag("ARN of the node role: the only role iam:PassRole is allowed for (required for "
                                     "rollout; all without it: no iam:PassRole)")
    account: str = flag("Account id to put in the ARNs (default: *, any account)", "*")
    partition: str = flag("AWS partition: aws (default), aws-cn or aws-us-gov", "aws")
    form: str | None = flag("With --task share: policy (key policy statements, default) or grants (CreateGrant calls)")


@dataclass(frozen=True)
class RestoreRequest:
    """`amibuild restore`."""

    ami: str = flag("The deregistered image to bring back (required), e.g. ami-0123456789abcdef0", "")
    region: str = flag("The region it was deregistered in (required)", "")
    profile: str | None = like(Output, "profile")
    json: bool = flag("Print what was restored as JSON on stdout", False)
