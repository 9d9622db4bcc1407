"""Jobs that span stages: `build_ami` bakes (amibuild.bake) and then publishes (amibuild.channels);
`fleet_jobs` read channels and their consumers (and the Karpenter hand-off); `verify_job` checks a channel's
signed statements beside a render of today's file.

Each job is one function taking one frozen settings value, made once by `amibuild.cli` from the
flags, the config and the pipeline file; it returns a frozen result that knows whether it failed
(`raise_for_status()`). The jobs that belong to one stage live in it: `lifecycle.clean.run` (clean-run),
`rehearse.job.run`, `channels.publish` (publish, promote, rollback), `handoff` (rollout,
nodegroup-deploy), `lifecycle.prune`.
"""
