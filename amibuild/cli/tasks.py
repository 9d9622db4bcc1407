"""The task table: every amibuild command, its request (the flags) and where its body lives.

`amibuild --list` and `amibuild TASK --help` read only this table and the requests; a task's job
module (`jobs.build_commands`, `jobs.node_commands`, ...) and what it imports load when the task runs.
Settings can also come from invoke's config (`amibuild.yaml`, `AMIBUILD_*`): see `ns.configure`.
"""

from dataclasses import dataclass
from functools import partial
from typing import Any

from invoke import Collection

from amibuild import values
from amibuild.jobs import requests_build, requests_channels, requests_nodes, requests_setup, requests_views
from amibuild.cli.command import task
from amibuild.jobs.signals import PRUNING
from amibuild.request import flag


@dataclass(frozen=True)
class SandboxRequest:
    """`amibuild sandbox`."""

    port: int = flag("Port on 127.0.0.1 (default: a free one)", cast=partial(values.count, minimum=0, maximum=65535,
                                                                            example=4566))


@dataclass(frozen=True)
class DemoRequest:
    """`amibuild demo`: no flags."""


TASKS = (
    task('jobs.build_commands', 'render', requests_build.RenderRequest,
         'Render Packer HCL2 for each variant into build/<variant>/.'),
    task('jobs.build_commands', 'validate', requests_build.RenderRequest,
         'Render, then check every file: python-hcl2 parse, packer validate, packer fmt -check.'),
    task('jobs.build_commands', 'rehearse', requests_build.RehearseRequest,
         "Run each variant's provisioners here, in a throwaway copy of this machine, before any instance exists."),
    task('jobs.build_ami', 'build_ami', requests_build.BuildRequest,
         'Render, validate and build the AMIs with Packer in parallel; skip what is unchanged.'),
    task('jobs.build_commands', 'runs', requests_build.RunsRequest,
         'List recent build runs and what each did.', shortflags=True),
    task('jobs.build_commands', 'clean_run', requests_build.CleanRunRequest,
         'Remove what an unfinished build run left in AWS (never an image in use); say what it kept and why.', shortflags=True),
    task('jobs.channel_commands', 'publish', requests_channels.PublishRequest,
         "Publish AMI ids built elsewhere to a variant's SSM channel, in every target region or none.", signals=True),
    task('jobs.channel_commands', 'promote', requests_channels.PromoteRequest,
         "Copy a channel's exact AMI, region by region, into another channel.", signals=True),
    task('jobs.channel_commands', 'rollback', requests_channels.RollbackRequest,
         'Put a channel back to an earlier AMI from its parameter history.', signals=True),
    task('jobs.channel_commands', 'history', requests_channels.HistoryRequest,
         "Show a variant's channel history: version, time, AMI, fingerprint, run id, who wrote it."),
    task('jobs.channel_commands', 'channels', requests_channels.ChannelsRequest,
         'List every variant x channel x region: AMI, version, age; --check / --repair split channels.'),
    task('jobs.node_commands', 'nodegroup_deploy', requests_nodes.DeployRequest,
         "Create or update a node group stack from amibuild's template, pointed at a channel's parameter."),
    task('jobs.node_commands', 'rollout', requests_nodes.RolloutRequest,
         "Roll a node group stack or EKS managed node group to a channel's AMI: change set, update, verify."),
    task('jobs.node_commands', 'userdata', requests_nodes.UserdataRequest,
         'Print node user data (MIME multi-part), or with --k8s-manifests the cluster side of a proxy.'),
    task('jobs.node_commands', 'decode_userdata', requests_nodes.DecodeUserdataRequest,
         'Decode user data (base64, gzip, MIME, cloud-config, any nesting) and print each part.'),
    task('jobs.node_commands', 'aws_auth', requests_nodes.AwsAuthRequest,
         "Print the aws-auth mapRoles entry for the nodes' role, or create its EKS access entry."),
    task('jobs.setup_commands', 'prune', requests_setup.PruneRequest,
         'Delete old images amibuild made: keep the newest N per variant and region and every image in use.',
         signals=PRUNING),
    task('jobs.setup_commands', 'iam_policy', requests_setup.IamPolicyRequest,
         'Print a least-privilege IAM policy (JSON) for a task: build, publish, rollout, prune, fleet, test, verify, scan, all, or share.'),
    task('jobs.build_commands', 'matrix', requests_build.MatrixRequest,
         'Print the variants as a CI matrix, so each runner builds one variant.'),
    task('jobs.setup_commands', 'doctor', requests_setup.DoctorRequest,
         'Check packer, AWS credentials, region, endpoint and the pipeline file; say what to fix.'),
    task('tasks_sandbox', 'sandbox', SandboxRequest,
         'Run the local AWS emulator in the foreground (prints `export` lines first).', shortflags=True),
    task('tasks_sandbox', 'demo', DemoRequest,
         'Run the whole pipeline against the local emulator, printing each step (the README demo).'),
    task('jobs.setup_commands', 'init', requests_setup.InitRequest,
         'Write a starter amibuild.hcl (one AL2023 variant with ceph-common) and ignore build/ in .gitignore.'),
    task('jobs.build_commands', 'tests', requests_build.TestsRequest,
         "List the checks each variant's image must pass: built-in (per OS and flavor) and the pipeline file's."),
    task('jobs.ami_test', 'test_ami', requests_build.TestAmiRequest,
         'Boot the image, run every check through SSM Run Command, terminate it; tag the image passed or failed.'),
    task('jobs.view_commands', 'fleet', requests_views.FleetRequest,
         'Show every channel and every consumer of its images (stacks, node groups, instances) and how far behind.'),
    task('jobs.view_commands', 'karpenter', requests_views.KarpenterRequest,
         'Print an EC2NodeClass that follows a channel: a promote becomes drift, Karpenter replaces the nodes.'),
    task('jobs.view_commands', 'verify', requests_views.VerifyRequest,
         "Check an image's signed statements (provenance, tests, scans) in every region a channel holds; exit 1 naming what fails."),
    task('jobs.view_commands', 'sbom', requests_views.SbomRequest,
         "Print an image's package list (its signed SBOM): CycloneDX, SPDX or a table."),
    task('jobs.view_commands', 'diff', requests_views.DiffRequest,
         'Compare two images of a variant: packages, kernel/kubelet/containerd/nodeadm, settings, vulnerabilities.'),
    task('jobs.view_commands', 'scan', requests_views.ScanRequest,
         "Scan an image's SBOM with Amazon Inspector (ScanSbom); keep the findings as a signed scan statement."),
    task('jobs.view_commands', 'allowed_amis', requests_views.AllowedAmisRequest,
         "Print the Allowed AMIs criteria that admit this pipeline's images, with the CLI and CloudFormation to apply them."),
    task('jobs.setup_commands', 'restore', requests_setup.RestoreRequest,
         'Bring a deregistered image back from the Recycle Bin, with its snapshots and tags.'),
)

# the `amibuild:` section of a configuration file (amibuild.yaml, --config), with its defaults; cli.main checks
# the files against it
SETTINGS: dict[str, Any] = {
    "pipeline": None,  # default: amibuild.hcl when present
    "build_dir": "build",
    "packer": "packer",
    "cache_dir": None,
    # None (defaults in the task: 8, 10 s) so that invoke passes the environment's text through and
    # the task words the error; a number here makes invoke cast AMIBUILD_AMIBUILD_MAX_PARALLEL itself
    "max_parallel": None,
    # seconds a channel write waits for another writer's lease on the channel (default 30); None
    # so that invoke passes INVOKE_AMIBUILD_LEASE_WAIT through as text and `jobs.env.guard` words the error
    "lease_wait": None,
    "lease_ttl": None,  # seconds a channel lease is good for (default 300)
    "read_timeout": None,  # seconds a channel write's request waits for its answer (default 10)
    "channel_deadline": None,  # seconds of waiting on AWS a channel write may spend in all (default 30)
    "stall_after": None,  # seconds of silence from Packer before build-ami checks the endpoint is alive
}

# the settings that are paths (a number there, `build_dir: 5`, is read as its text); the others are numbers
PATH_SETTINGS = ("pipeline", "build_dir", "packer", "cache_dir")

ns = Collection(*TASKS)
ns.configure({"amibuild": dict(SETTINGS)})
