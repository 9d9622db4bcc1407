"""Image tests: run an image's checks, on the build instance (stage 1) and on a booted instance (stage 2).

    standin.py   the sandbox's stand-in of an image: the variant's real provisioning chain rehearsed
                 in a throwaway copy of this machine, then a script (the checks, or an SSM command)

What the checks are is `amibuild.pipeline.imagetests` (pure); whether an image may enter a
channel is `amibuild.channels.gates` (pure).
"""
