"""The CPU budget (tests/budget.py) fails a run that goes over it, naming the budget, in one
process and under xdist (whose controller adds up what every worker and the processes it
waited for used); a part of the suite within it passes, the budget reported as its last
test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.budget import BUDGET_NODEID, budget_seconds

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "tests/data/budget_sample.py"  # two tests, each a child that burns 1 s of CPU
WORKERS = {"one process": ["-p", "no:xdist"], "two xdist workers": ["-n", "2"]}


def pytest_on_the_sample(
    *args: str, budget_s: str | None, shared_cores: str = "1000"
) -> subprocess.CompletedProcess[str]:
    """The sample under the budget plugin. `shared_cores`: how busy the machine may be for
    the budget to be judged; the suite itself runs beside this one, so by default any."""
    env = {k: v for k, v in os.environ.items() if k != "GRPO_TEST_BUDGET_S"}
    if budget_s is not None:
        env["GRPO_TEST_BUDGET_S"] = budget_s
    env["GRPO_TEST_BUDGET_SHARED_CORES"] = shared_cores
    # the budget plugin alone: the suite's conftest would load every fixture plugin (the
    # service, Playwright) in the run and in each of its workers, for two small tests
    argv = [sys.executable, "-m", "pytest", SAMPLE, "-v", "-p", "no:cacheprovider",
            "--noconftest", "-p", "tests.budget", *args]  # fmt: skip
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS.keys())
def test_a_run_over_its_budget_fails_naming_the_budget(workers: list[str]) -> None:
    # 1.9 s: under what the two children burn together, whoever ran them (a worker, or the
    # one process), so it fails only if every process's children are counted and summed
    over = pytest_on_the_sample(*workers, budget_s="1.9")
    assert over.returncode == 1, over.stdout + over.stderr
    assert "1 failed, 2 passed" in over.stdout, over.stdout
    assert f"FAILED {BUDGET_NODEID}" in over.stdout
    assert "over the budget of 1.9 s (tests/budget.toml, GRPO_TEST_BUDGET_S)" in over.stdout
    summary = re.search(r"suite: 3 tests, [\d.,]+ s of test time, ([\d.,]+) s of CPU, budget "
                        r"1\.9 s of CPU \(tests/budget\.toml\)", over.stdout)  # fmt: skip
    assert summary, over.stdout
    assert float(summary[1].replace(",", "")) >= 2.0  # the children's seconds at least
    by_file = re.search(rf"most CPU \(files\): {re.escape(SAMPLE)} ([\d.,]+) s", over.stdout)
    assert by_file, over.stdout  # the file's tests and their children, from every worker
    assert float(by_file[1].replace(",", "")) >= 2.0


def test_a_part_of_the_suite_ends_with_the_budget_and_passes_within_the_file_budget() -> None:
    part = pytest_on_the_sample("-p", "no:xdist", "-k", "first", budget_s=None)
    assert part.returncode == 0, part.stdout + part.stderr
    ran = [line.split(" ")[0] for line in part.stdout.splitlines() if " PASSED" in line]
    assert ran == [f"{SAMPLE}::test_first_burns_a_second_of_cpu_in_a_child", BUDGET_NODEID]
    assert f"budget {budget_seconds():g} s of CPU (tests/budget.toml)" in part.stdout


def test_on_a_machine_busier_than_the_bound_the_budget_is_not_judged_and_says_so() -> None:
    """Bound -1 cores: whatever the others used (none at all included) is more, so the run
    is one on a shared machine: over its budget, the budget's test is skipped, not failed."""
    shared = pytest_on_the_sample("-p", "no:xdist", budget_s="1.9", shared_cores="-1")
    assert shared.returncode == 0, shared.stdout + shared.stderr
    assert "2 passed, 1 skipped" in shared.stdout, shared.stdout
    assert re.search(r"SKIPPED \[1\] tests/budget\.toml:\d+: the budget is not judged: other "
                     r"processes used [\d.]+ cores on average beside the suite \(more than -1",
                     shared.stdout), shared.stdout  # fmt: skip
    assert re.search(r"other processes [\d.]+ cores", shared.stdout), shared.stdout
