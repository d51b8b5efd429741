"""The suite's test-time budget, as a pytest plugin (registered by tests/conftest.py).

Every test report's duration (setup, call and teardown) is added up as the run goes;
tests/test_budget.py, always run and always last, fails when the sum exceeds the budget in
tests/budget.toml (or GRPO_TEST_BUDGET_S, when lower); the terminal summary prints the
total. A subset of the suite (`-k`, a path) still runs the budget test, which passes unless
that subset alone is over the budget. Knows nothing of what the tests test.
"""

from __future__ import annotations

import os
import time
import tomllib
from collections import Counter
from collections.abc import Generator
from pathlib import Path

import pytest

BUDGET_FILE = Path(__file__).with_name("budget.toml")
BUDGET_TEST_FILE = Path(__file__).with_name("test_budget.py")
BUDGET_TEST = "test_the_suite_stays_within_its_test_time_budget"


def budget_seconds() -> float:
    """tests/budget.toml's `seconds`, or GRPO_TEST_BUDGET_S where that is lower (to check
    the check; only the file raises it)."""
    seconds = float(tomllib.loads(BUDGET_FILE.read_text())["seconds"])
    if lowered := os.environ.get("GRPO_TEST_BUDGET_S"):
        seconds = min(seconds, float(lowered))
    return seconds


class Tally:
    """Seconds of test time this run so far, and the tests they came from."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.tests: set[str] = set()
        self.by_file: Counter[str] = Counter()
        self.by_fixture: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds += report.duration
        self.tests.add(report.nodeid)
        self.by_file[report.nodeid.split("::")[0]] += report.duration

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[object]) -> Generator[None]:
        """Where setup time goes: the seconds each fixture's setups took, all scopes."""
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            self.by_fixture[fixturedef.argname] += time.perf_counter() - start

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, items: list[pytest.Item]
    ) -> Generator[None]:
        """After every other reordering and deselection (`-k`, `--lf`, `--ff`): the budget
        test last, added when the selection left it out."""
        yield
        budget = [i for i in items if i.path == BUDGET_TEST_FILE and i.name == BUDGET_TEST]
        if not budget:
            module = pytest.Module.from_parent(session, path=BUDGET_TEST_FILE)
            budget = [i for i in module.collect() if i.name == BUDGET_TEST]  # type: ignore[misc]
        items[:] = [i for i in items if i not in budget] + budget

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The total last; before it where the time went: by folder, the slowest files and
        the fixtures whose setups took longest (a fixture's time is inside its tests')."""
        write = terminalreporter.write_line
        by_folder: Counter[str] = Counter()
        for path, seconds in self.by_file.items():
            by_folder[path.rsplit("/", 1)[0]] += seconds
        if len(self.by_file) > 1:
            folders = by_folder.most_common()
            write("test time by folder: " + ", ".join(f"{f} {s:,.0f} s" for f, s in folders))
            files = self.by_file.most_common(15)
            write("slowest files: " + ", ".join(f"{f} {s:,.0f} s" for f, s in files))
            fixtures = self.by_fixture.most_common(15)
            write("slowest fixture setups: " + ", ".join(f"{f} {s:,.1f} s" for f, s in fixtures))
        write(
            f"suite: {len(self.tests)} tests, {self.seconds:,.1f} s of test time, "
            f"budget {budget_seconds():g} s (tests/{BUDGET_FILE.name})"
        )


TALLY = pytest.StashKey[Tally]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[TALLY] = Tally()
    config.pluginmanager.register(config.stash[TALLY], "grpo-test-budget")
