"""The suite's test-time budget (tests/budget.py, tests/budget.toml): this test runs last in
every run, the whole suite or a part, and fails once the run's tests took longer in all."""

from __future__ import annotations

import pytest

from tests.budget import BUDGET_FILE, TALLY, budget_seconds


def test_the_suite_stays_within_its_test_time_budget(request: pytest.FixtureRequest) -> None:
    tally = request.config.stash[TALLY]
    budget = budget_seconds()
    assert tally.seconds <= budget, (
        f"{len(tally.tests)} tests took {tally.seconds:,.3f} s of test time, over the budget of "
        f"{budget:g} s (tests/{BUDGET_FILE.name}, GRPO_TEST_BUDGET_S): make the new tests "
        "cheaper, or raise the budget as docs/how-to/development.md says"
    )
