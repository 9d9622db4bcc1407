"""`amibuild doctor`'s checks (`amibuild.jobs.doctor_job`) with the CLI's own way out when no
credentials or no endpoint answer: `amibuild sandbox`, the local emulator."""

from functools import partial

from amibuild.cli.run import HINTS
from amibuild.errors import NoCredentials
from amibuild.jobs import doctor_job as job

EMULATOR = job.Hints(credentials=HINTS[NoCredentials], endpoint="start the emulator (`amibuild sandbox`) or ")
checks = partial(job.checks, hints=EMULATOR)
check_credentials = partial(job.check_credentials, hints=EMULATOR)
check_endpoints = partial(job.check_endpoints, hints=EMULATOR)
