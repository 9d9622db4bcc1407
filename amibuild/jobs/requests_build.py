"""The requests (flags) of the build tasks, and the flag groups other requests share: `Selection`
(the 14 selection and input flags), `Output` and `ChannelRequest`. Their jobs: `build_commands`, `build_ami`, `ami_test`."""

from dataclasses import dataclass
from functools import partial

from amibuild import values
from amibuild.request import JSON_HELP, K8S_HELP, MARKDOWN_HELP, flag, like


@dataclass(frozen=True)
class Selection:
    """The 14 selection and input flags render, validate, rehearse and build-ami share."""

    pipeline: str | None = flag("Pipeline file (default: the nearest amibuild.hcl in this folder or above it, up to "
                                "the repository root)")
    variant: tuple[str, ...] = flag("Variant to use (repeatable; default: every variant in the pipeline file)",
                                    repeat=True)
    base: str | None = flag("Base: eks-optimized (default) or upstream")
    upstream: str | None = flag("Upstream amazon-eks-ami checkout: a path or git URL (with --base upstream)")
    upstream_ref: str | None = flag("Git ref (tag, branch, commit) of the upstream checkout")
    os: str | None = flag("Operating system: al2 or al2023")
    k8s: str | None = flag("Kubernetes version, e.g. 1.30 (the upstream base also takes 1.30.4 with "
                           "--var kubernetes_build_date=...)")
    arch: str | None = flag("Architecture: x86_64 or arm64")
    flavor: str | None = flag("EKS-optimized image flavor: standard (default), nvidia or neuron (al2023), gpu (al2)")
    region: tuple[str, ...] = flag("Build region (repeatable; default: the pipeline's regions, else AWS_REGION)",
                                   repeat=True)
    extra_pkg: tuple[str, ...] = flag("Extra RPM package to install (repeatable; added to the variant's own)",
                                      repeat=True)
    extra_repo: tuple[str, ...] = flag(
        "Extra yum repository NAME=URL|GPGKEY (repeatable; added to the variant's own): GPGKEY an https:// URL or "
        "a local armored key file, or NAME=URL|gpgcheck=false; |insecure=true to allow plain http", repeat=True)
    var: tuple[str, ...] = flag("Packer variable KEY=VALUE (repeatable; wins over everything else)", repeat=True)
    var_file: tuple[str, ...] = flag("Packer var-file FILE.pkrvars.hcl (repeatable; later files win)", repeat=True)


@dataclass(frozen=True)
class Output:
    """Where a job writes and whose AWS credentials it uses."""

    build_dir: str | None = flag("Output folder (default: build)")
    profile: str | None = flag("AWS profile (default: AWS_PROFILE / the standard chain)")


@dataclass(frozen=True)
class ChannelRequest:
    """The flags that name one variant's channels: publish, promote, rollback, history."""

    pipeline: str | None = like(Selection, "pipeline")
    variant: str | None = flag("Variant whose channel this is (default: the pipeline's only variant)")
    k8s: str | None = flag(K8S_HELP)
    profile: str | None = like(Output, "profile")
    json: bool = flag(JSON_HELP, False)


@dataclass(frozen=True)
class RenderRequest(Selection, Output):
    """`amibuild render` and `amibuild validate`."""

    json: bool = flag("Print what was rendered (folders, fingerprints, source AMIs, notes) as JSON on stdout", False)


@dataclass(frozen=True)
class BuildRequest(Selection, Output):
    """`amibuild build-ami`."""

    all: bool = flag("Build every variant of the pipeline file (the default when no --variant is given)", False)
    force: bool = flag("Rebuild even when an image with the same fingerprint exists", False)
    dry_run: bool = flag("Print the plan (what would be built, what skipped and why) and exit", False)
    json: bool = flag("Print one JSON summary on stdout (progress goes to stderr)", False)
    parallel: int | None = flag("Packer builds at once (default: every variant, capped by amibuild.max_parallel)",
                                cast=partial(values.optional_count, example=4))
    timeout: float | None = flag("Give up on a variant's build after this long: seconds, or 90s, 45m, 2h",
                                 cast=partial(values.optional_duration, example="90m or 5400"))
    channel: str | None = flag("Channel to publish each built or reused image to (default: the pipeline's "
                               "default_channel, else recommended)")
    no_publish: bool = flag("Build only; publish nothing", False)
    verbose: bool = flag("Show each Packer step as it happens (default: a line per variant's phase; every step is "
                         "always in the variant's packer.log)", False)
    new_channel: bool = flag("--channel is a new name: neither declared (a `channel` block, default_channel, "
                             "recommended, candidate, stable) nor there yet for every variant; without it such a "
                             "name is refused as a typo", False)
    rehearse: bool = flag("Rehearse each variant's provisioning chain first (as `amibuild rehearse`, needs root); a "
                          "failing or incomplete rehearsal fails that variant before its Packer build starts", False)
    allow_incomplete: bool = flag("With --rehearse: build a variant whose rehearsal stopped at a step it cannot "
                                  "rehearse", False)
    no_wait: bool = flag("When another run is building a variant with the same inputs, fail (exit 1, naming that "
                         "run) instead of waiting for it and reusing its image", False)
    markdown: bool = flag(MARKDOWN_HELP, False)
    boot_test: bool = flag("Boot each built image (`amibuild test-ami`, in parallel) before publishing; a variant "
                           "whose boot test fails is not published (exit 1), the others go on", False)
    scan: bool = flag("Scan each built image's SBOM with Amazon Inspector (ScanSbom) before publishing; the findings "
                      "are kept as a signed scan statement, which a channel's `requires = [\"scanned\"]` gate reads",
                      False)
    cluster: str | None = flag("With --boot-test: EKS cluster each test node joins, tainted "
                               "amibuild.io/test:NoSchedule, and must get Ready in (default: the pipeline's test "
                               "{ cluster }; needs amibuild[cluster] and a kubeconfig)")


@dataclass(frozen=True)
class RehearseRequest(Selection):
    """`amibuild rehearse`: writes nothing, calls no AWS (no --build-dir, no --profile)."""

    json: bool = flag("Print the reports as JSON on stdout (progress goes to stderr)", False)
    keep: bool = flag("Keep the overlay's upper layer (every file the chain wrote) and print where it is", False)
    timeout: float | None = flag("Stop a variant's rehearsal after this many seconds (default 600)",
                                 cast=partial(values.optional_duration, example="600 or 10m"))
    markdown: bool = flag(MARKDOWN_HELP, False)
    allow_incomplete: bool = flag("Exit 0 when a rehearsal stopped at a step it cannot rehearse (default: exit 3)",
                                  False)


@dataclass(frozen=True)
class RunsRequest:
    """`amibuild runs`."""

    limit: int = flag("How many runs to show (default 10)", 10, cast=partial(values.count, example=10))
    json: bool = flag("Print JSON", False)
    build_dir: str | None = like(Output, "build_dir")


@dataclass(frozen=True)
class CleanRunRequest:
    """`amibuild clean-run` (its short flags follow this order: -r, -d, -j, -p, -o, -b)."""

    run_id: str | None = flag("The build run whose leftovers to remove (`amibuild runs` lists them)")
    dry_run: bool = flag("List what the run left behind and remove nothing", False)
    json: bool = flag("Print JSON", False)
    pipeline: str | None = like(Selection, "pipeline")
    profile: str | None = like(Output, "profile")
    build_dir: str | None = like(Output, "build_dir")


@dataclass(frozen=True)
class MatrixRequest:
    """`amibuild matrix`."""

    pipeline: str | None = like(Selection, "pipeline")
    variant: tuple[str, ...] = like(Selection, "variant")
    json: bool = flag("Print the matrix as JSON on stdout", False)
    github: bool = flag("Append matrix=<json> to $GITHUB_OUTPUT (GitHub Actions) and print that line", False)


@dataclass(frozen=True)
class TestsRequest:
    """`amibuild tests`."""

    __test__ = False  # pytest: not a test class
    pipeline: str | None = like(Selection, "pipeline")
    variant: tuple[str, ...] = like(Selection, "variant")
    json: bool = flag("Print JSON", False)


@dataclass(frozen=True)
class TestAmiRequest(Output):
    """`amibuild test-ami`."""

    __test__ = False  # pytest: not a test class
    variant: str | None = flag("Variant whose image to test (default: the pipeline's only variant)")
    ami: str | None = flag("The image to boot, in the build region (its copies are tagged with the result too)")
    run_id: str | None = flag("Test the image a build run made of the variant")
    channel: str | None = flag("Test the image the variant's channel holds, e.g. recommended (in every region it "
                               "is published in)")
    cluster: str | None = flag("EKS cluster the test node joins (tainted amibuild.io/test:NoSchedule)")
    subnet: str | None = flag("Subnet of the test instance (default: the pipeline's test { subnet_id })")
    security_group: str | None = flag("Security group of the test instance (default: test { security_group_id })")
    instance_profile: str | None = flag("Instance profile of the test instance, with SSM access (default: test "
                                        "{ instance_profile })")
    instance_type: str | None = flag("Instance type (default: test { instance_type }, else the variant's)")
    timeout: float | None = flag("Give up after this long: seconds, or 15m (default: test { timeout }, else 15m)",
                                 cast=partial(values.optional_duration, example="15m or 900"))
    pipeline: str | None = like(Selection, "pipeline")
    json: bool = flag("Print the result as JSON on stdout", False)
