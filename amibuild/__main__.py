"""`python -m amibuild`: the same program as the `amibuild` command."""

from amibuild.cli.main import main

main()
