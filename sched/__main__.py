"""`python -m sched ...` is the `sched` command."""

import sys

from sched.cli import main

sys.exit(main())
