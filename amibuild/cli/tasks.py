"""amibuild tasks: `amibuild --list` shows them, `amibuild TASK --help` lists every flag.

Each task parses its flags, calls into `amibuild` and prints; the work lives in the package.
Heavy modules (boto3, jinja2, python-hcl2) are imported inside the task bodies so that
`amibuild --list` stays fast: each such import says so (`# deferred`). Settings can also come from invoke's config (`invoke.yaml`,
`INVOKE_AMIBUILD_*` environment variables): see `ns.configure` at the bottom.

The tasks live by group (`tasks_build`, `tasks_channels`, `tasks_nodes`, `tasks_lifecycle`,
`tasks_setup`, what they share in `tasks_common`; fleet and karpenter in `fleet`); this module
assembles them into the one collection, `ns`, in the order `amibuild --help TASK` and invoke see.
"""

from invoke import Collection

from amibuild.cli.guardrails import allowed_amis
from amibuild.cli.fleet_view import fleet, karpenter
from amibuild.cli.inventory import diff, sbom, scan
from amibuild.cli.verify_view import verify
from amibuild.cli.tasks_build import build_ami, clean_run, matrix, rehearse, render, runs, test_ami, tests, validate
from amibuild.cli.tasks_channels import channels, history, promote, publish, rollback
from amibuild.cli.tasks_lifecycle import iam_policy, prune, restore
from amibuild.cli.tasks_nodes import aws_auth, decode_userdata, nodegroup_deploy, rollout, userdata
from amibuild.cli.tasks_setup import demo, doctor, init, sandbox

ns = Collection(render, validate, rehearse, build_ami, runs, clean_run, publish, promote, rollback, history, channels,
                nodegroup_deploy, rollout, userdata, decode_userdata, aws_auth, prune, iam_policy, matrix, doctor,
                sandbox, demo, init, tests, test_ami)
# fleet view and Karpenter hand-off: their tasks live in amibuild/cli/fleet_view.py
ns.add_task(fleet)
ns.add_task(karpenter)
ns.add_task(verify)  # amibuild/cli/verify_view.py
ns.add_task(sbom)  # amibuild/cli/inventory.py
ns.add_task(diff)
ns.add_task(scan)
ns.add_task(allowed_amis)  # amibuild/cli/guardrails.py
ns.add_task(restore)  # amibuild/cli/tasks_lifecycle.py
ns.configure({
    "amibuild": {
        "pipeline": None,  # default: amibuild.hcl when present
        "build_dir": "build",
        "packer": "packer",
        "cache_dir": None,
        "max_parallel": 8,
        # seconds a channel write waits for another writer's lease on the channel (default 30); None
        # so that invoke passes INVOKE_AMIBUILD_LEASE_WAIT through as text and `_guard` words the error
        "lease_wait": None,
        "lease_ttl": None,  # seconds a channel lease is good for (default 300)
        "read_timeout": None,  # seconds a channel write's request waits for its answer (default 10)
        "channel_deadline": None,  # seconds of waiting on AWS a channel write may spend in all (default 30)
        "stall_after": 10,  # seconds of silence from Packer before build-ami checks the endpoint is alive
    }
})
