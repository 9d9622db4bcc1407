"""This repository's invoke entry point: `invoke build-ami ...` here runs the same tasks as `amibuild`."""

from amibuild.cli.tasks import ns  # noqa: F401  (invoke looks for `ns` in tasks.py)
