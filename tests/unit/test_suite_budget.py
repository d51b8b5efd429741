"""The test-time budget (tests/budget.py) fails a run that goes over it, naming the budget,
and a part of the suite still ends with the budget test, which passes within it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.budget import budget_seconds

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "tests/data/budget_sample.py"  # one test of at least 10 ms


def pytest_on_the_sample(*args: str, budget_s: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GRPO_TEST_BUDGET_S"}
    if budget_s is not None:
        env["GRPO_TEST_BUDGET_S"] = budget_s
    argv = [sys.executable, "-m", "pytest", SAMPLE, "-v", "-p", "no:cacheprovider", *args]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_run_over_its_budget_fails_naming_the_budget() -> None:
    over = pytest_on_the_sample(budget_s="0.001")
    assert over.returncode == 1, over.stdout + over.stderr
    assert "1 failed, 1 passed" in over.stdout, over.stdout
    assert "FAILED tests/test_budget.py::test_the_suite_stays_within_its_test_time_budget" in (
        over.stdout
    )
    assert "over the budget of 0.001 s (tests/budget.toml, GRPO_TEST_BUDGET_S)" in over.stdout
    assert "suite: 2 tests," in over.stdout and "budget 0.001 s (tests/budget.toml)" in over.stdout


def test_a_part_of_the_suite_ends_with_the_budget_test_and_passes_within_the_file_budget() -> None:
    part = pytest_on_the_sample("-k", "ten_milliseconds", budget_s=None)
    assert part.returncode == 0, part.stdout + part.stderr
    ran = [line.split(" ")[0] for line in part.stdout.splitlines() if " PASSED" in line]
    assert ran == [
        "tests/data/budget_sample.py::test_takes_at_least_ten_milliseconds",
        "tests/test_budget.py::test_the_suite_stays_within_its_test_time_budget",
    ], part.stdout
    assert f"budget {budget_seconds():g} s (tests/budget.toml)" in part.stdout
