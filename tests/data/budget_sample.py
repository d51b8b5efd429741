"""Tests for tests/project/test_suite_budget.py to run in a pytest of its own; the suite does
not collect them (the file's name does not start with test_). Each starts a process that
burns a second of CPU and waits for it, as the suite's tests start services and runs: the
budget counts it."""

from __future__ import annotations

import subprocess
import sys

BURN = "import time\nwhile time.process_time() < 1.0: pass"


def test_first_burns_a_second_of_cpu_in_a_child() -> None:
    subprocess.run([sys.executable, "-c", BURN], check=True, timeout=120)


def test_second_burns_a_second_of_cpu_in_a_child() -> None:
    subprocess.run([sys.executable, "-c", BURN], check=True, timeout=120)
