"""This repository's invoke entry point: `invoke build-ami ...` here runs the same tasks as `amibuild`."""

from amibuild.cli.main import adopt_invoke_program
from amibuild.cli.tasks import ns  # noqa: F401  (invoke looks for `ns` in tasks.py)

# `invoke TASK --bad-flag` here answers like `amibuild` (one line, did-you-mean, exit 2)
adopt_invoke_program()
