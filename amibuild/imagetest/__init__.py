"""Image tests: run an image's checks, on the build instance (stage 1) and on a booted instance (stage 2).

    boot.py         stage 2: launch, status checks, SSM, each check, terminate, tag
    invocation.py   one Run Command invocation: its ResponseCode the verdict, its output data
    after_build.py  the boot test a build runs before it publishes
    kube.py         the cluster's API: the test node joins, is cordoned and deleted
    statements.py   the signed test statement of a run

What the checks are is `amibuild.pipeline.imagetests` (pure); whether an image may enter a
channel is `amibuild.channels.gates` (pure).
"""
