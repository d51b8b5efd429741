"""`python -m grpo.cli ...`: the `grpo` command (grpo/cli/main.py) run as a module."""

import sys

from grpo.cli.main import main

sys.exit(main())
