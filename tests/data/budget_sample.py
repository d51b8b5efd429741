"""Tests for tests/project/test_suite_budget.py to run in a pytest of its own; the suite does
not collect them (the file's name does not start with test_)."""

from __future__ import annotations

import time


def test_first_takes_at_least_ten_milliseconds() -> None:
    time.sleep(0.01)  # a floor under its duration, whatever the load: not a wait


def test_second_takes_at_least_ten_milliseconds() -> None:
    time.sleep(0.01)
