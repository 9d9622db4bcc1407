"""`python -m amibuild.sandbox`: the emulator in the foreground, or (`serve`) the child process itself."""

import sys

from amibuild.sandbox import main

sys.exit(main())
