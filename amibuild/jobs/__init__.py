"""The jobs: one per command, `command(request, env) -> Shown`.

A command's request (`requests_*`) is the frozen dataclass the cli parsed from its flags; `env.Env`
carries what the cli knows besides (the config's settings, the pipeline file it found, the platform,
how to say a line). The job calls into its stage and returns a `shown.Shown`: the result (`to_dict`,
its lines, `raise_for_status`) and how to print it. `build_commands`, `build_ami`, `ami_test`,
`channel_commands`, `node_commands`, `setup_commands` and `view_commands` hold the commands;
`fleet_jobs`, `verify_job`, `image_inventory`, `init_job` and `doctor_job` the jobs that span stages.
"""
