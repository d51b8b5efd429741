"""The suite's test-time budget and where its time goes, as a pytest plugin (registered by
tests/conftest.py).

The budget is CPU seconds: the processor time of every process of the run, pytest's own, its
xdist workers' and everything they started and waited for (services, Celery workers, the
runs' processes, engines, Chromium), as the kernel counts it (getrusage: each process's
own, and its children's once reaped). Unlike the test durations, that does not grow when
the machine is busy: a clean-clone run took 4,263 s of test time quiet and 6,282 s beside a
loop burning one of the two cores, for the same work (and 1,912 s against 1,916 s of CPU).
Past that it does grow: beside other work of three to four cores' worth (other test runs,
a vLLM server) a clean-clone run used 4,093 s of CPU where a quiet one used 2,496 s (threads
that spin while their siblings wait for a core, every poll and heartbeat over twice the wall
time). So the budget is judged only when the machine was the suite's: when the other
processes used at most SHARED_CORES cores on average over the run (the kernel's /proc/stat
busy time less the suite's own CPU); past that its test is skipped, saying what the others
used. When the run ends, the budget is
checked as one more test, `tests/budget.toml::test_time_budget`: it fails when the CPU
seconds exceed `cpu_seconds` in tests/budget.toml (or GRPO_TEST_BUDGET_S, when lower), so a
run over its budget ends as a failed run whatever its parts did. A part of the suite (`-k`,
a path) passes unless that part alone is over the budget.

Every test report's duration (setup, call and teardown) is added up too, in the process
that prints the results (pytest's own, or xdist's controller, which receives every worker's
reports): the summary says where the time went (by folder, the slowest files and fixture
setups) and the total beside the CPU seconds.

Under xdist (`make test` runs `-n`), each worker orders its files longest first by the
seconds recorded in tests/durations.json (files not recorded first), so that the longest
files start early and none is left to run alone at the end; GRPO_WRITE_DURATIONS=1 rewrites
that record from the run. Knows nothing of what the tests test.
"""

from __future__ import annotations

import json
import math
import os
import resource
import time
import tomllib
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

BUDGET_FILE = Path(__file__).with_name("budget.toml")
DURATIONS_FILE = Path(__file__).with_name("durations.json")
BUDGET_NODEID = "tests/budget.toml::test_time_budget"
SHARED_CORES = 1.25
"""Cores' worth of CPU other processes may use on average beside the suite while its budget
is still judged (a loop burning one core left the suite's CPU as it was);
GRPO_TEST_BUDGET_SHARED_CORES sets another bound (to check the check)."""


def budget_seconds() -> float:
    """tests/budget.toml's `cpu_seconds`, or GRPO_TEST_BUDGET_S where that is lower (to check
    the check; only the file raises it)."""
    seconds = float(tomllib.loads(BUDGET_FILE.read_text())["cpu_seconds"])
    if lowered := os.environ.get("GRPO_TEST_BUDGET_S"):
        seconds = min(seconds, float(lowered))
    return seconds


def machine_busy_seconds() -> float:
    """CPU seconds every process of the machine has used since boot (/proc/stat's first
    line: all but idle and iowait; guest time is inside user time already)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def shared_cores() -> float:
    return float(os.environ.get("GRPO_TEST_BUDGET_SHARED_CORES", SHARED_CORES))


def recorded_durations() -> dict[str, float]:
    """Seconds per test file as a whole run recorded them (tests/durations.json)."""
    if not DURATIONS_FILE.exists():
        return {}
    return {str(k): float(v) for k, v in json.loads(DURATIONS_FILE.read_text()).items()}


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def cpu_seconds(*, children: bool) -> float:
    """User + system seconds of this process, and with `children` of every process it
    started and waited for (theirs included, recursively, as each waited for its own)."""
    who = [resource.RUSAGE_SELF] + ([resource.RUSAGE_CHILDREN] if children else [])
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, who))


class Tally:
    """Seconds of test time this run so far, and the tests they came from."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds = 0.0
        self.cpu_of_workers = 0.0
        """The CPU seconds the xdist workers reported (theirs and their children's)."""
        self.tests: set[str] = set()
        self.by_file: Counter[str] = Counter()
        self.by_fixture: Counter[str] = Counter()
        self.last_teardown = 0.0
        self.cpu_by_file: Counter[str] = Counter()
        """CPU seconds each file's tests used, theirs and their processes' once reaped (a
        module's services at its last test's teardown); what a session's fixtures and
        pytest itself use is in no file."""
        self.began = (time.monotonic(), machine_busy_seconds(), cpu_seconds(children=True))
        """(wall clock, the machine's busy CPU, this process's) when the run began."""

    def others_cores(self, cpu: float) -> float:
        """Cores' worth of CPU the machine's other processes used on average since the run
        began: its busy time less the run's own `cpu` (what this process had used before
        the run, its imports, is the run's too)."""
        wall = time.monotonic() - self.began[0]
        others = machine_busy_seconds() - self.began[1] - (cpu - self.began[2])
        return max(0.0, others) / max(wall, 1e-9)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds += report.duration
        self.tests.add(report.nodeid)
        self.by_file[report.nodeid.split("::")[0]] += report.duration

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None]:
        """The CPU one test used, with what it started and reaped, added to its file's; the
        teardown after a process's last test (every fixture left: the session's services,
        the browser) goes to LAST_TEARDOWN, not to whichever file happened to run last."""
        start = cpu_seconds(children=True)
        self.last_teardown = 0.0
        try:
            return (yield)
        finally:
            used = cpu_seconds(children=True) - start - self.last_teardown
            self.cpu_by_file[item.nodeid.split("::")[0]] += used
            if self.last_teardown:
                self.cpu_by_file[LAST_TEARDOWN] += self.last_teardown

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None]:
        start = cpu_seconds(children=True)
        try:
            return (yield)
        finally:
            if nextitem is None:
                self.last_teardown = cpu_seconds(children=True) - start

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[object]) -> Generator[None]:
        """Where setup time goes: the seconds each fixture's setups took, all scopes."""
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            self.by_fixture[fixturedef.argname] += time.perf_counter() - start

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """On an xdist worker (all collect alike, so the controller sees one order): files
        longest first as recorded, files not yet recorded before them, each file's tests in
        their own order. xdist's `--dist loadfile` then hands out files in this order."""
        if not is_xdist_worker(self.config):
            return
        recorded = recorded_durations()
        first_seen: dict[str, int] = {}
        for index, item in enumerate(items):
            first_seen.setdefault(item.nodeid.split("::")[0], index)

        def key(item: pytest.Item) -> tuple[float, int]:
            path = item.nodeid.split("::")[0]
            return (-recorded.get(path, math.inf), first_seen[path])

        items.sort(key=key)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Fixture times go to the controller; there (or in a run without xdist) the budget
        is reported as a test of its own, and a run over it fails."""
        if is_xdist_worker(self.config):
            output = self.config.workeroutput  # type: ignore[attr-defined]
            output["fixture_seconds"] = dict(self.by_fixture)
            output["cpu_by_file"] = dict(self.cpu_by_file)
            # the session's fixtures are torn down by now: their processes were waited for
            output["cpu_seconds"] = cpu_seconds(children=True)
            return
        if not self.tests or self.config.option.collectonly:
            return
        budget = budget_seconds()
        cpu = self.cpu_seconds()
        others = self.others_cores(cpu)
        shared = others > shared_cores()
        over = cpu > budget and not shared
        message = (
            f"{len(self.tests)} tests used {cpu:,.3f} s of CPU, over the budget of {budget:g} s "
            f"(tests/{BUDGET_FILE.name}, GRPO_TEST_BUDGET_S): make the new tests cheaper, or "
            "raise the budget as docs/how-to/development.md says"
        )
        longrepr: Any = message if over else None
        if shared:  # a skip's longrepr: (file, line, reason)
            longrepr = (f"tests/{BUDGET_FILE.name}", 0, f"Skipped: {self.not_judged(others)}")
        report = pytest.TestReport(
            nodeid=BUDGET_NODEID,
            location=(f"tests/{BUDGET_FILE.name}", None, "test_time_budget"),
            keywords={},
            outcome="skipped" if shared else "failed" if over else "passed",
            longrepr=longrepr,
            when="call",
        )
        self.config.hook.pytest_runtest_logreport(report=report)
        if over and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if os.environ.get("GRPO_WRITE_DURATIONS") == "1":
            files = {path: round(s, 1) for path, s in sorted(self.by_file.items())}
            files.pop(BUDGET_NODEID.split("::")[0], None)
            DURATIONS_FILE.write_text(json.dumps(files, indent=1) + "\n")

    @staticmethod
    def not_judged(others: float) -> str:
        return (
            f"the budget is not judged: other processes used {others:.2f} cores on average "
            f"beside the suite (more than {shared_cores():g}: a busy machine makes the suite's "
            "own CPU grow); run it again on a machine of its own"
        )

    def cpu_seconds(self) -> float:
        """The run's CPU seconds so far: this process's, and the xdist workers' as they
        reported them (the controller's own children are those workers: not counted twice),
        or, without xdist, this process's children's."""
        if self.config.pluginmanager.has_plugin("dsession"):  # xdist's controller
            return cpu_seconds(children=False) + self.cpu_of_workers
        return cpu_seconds(children=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """An xdist worker's fixture times and CPU seconds, added to the controller's."""
        output = getattr(node, "workeroutput", {})
        self.by_fixture.update(output.get("fixture_seconds", {}))
        self.cpu_by_file.update(output.get("cpu_by_file", {}))
        self.cpu_of_workers += float(output.get("cpu_seconds", 0.0))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The total last; before it where the time went: by folder, the slowest files and
        the fixtures whose setups took longest (a fixture's time is inside its tests')."""
        write = terminalreporter.write_line
        by_folder: Counter[str] = Counter()
        for path, seconds in self.by_file.items():
            by_folder[path.rsplit("/", 1)[0]] += seconds
        if len(self.by_file) > 2:
            folders = by_folder.most_common()
            write("test time by folder: " + ", ".join(f"{f} {s:,.0f} s" for f, s in folders))
            files = self.by_file.most_common(15)
            write("slowest files: " + ", ".join(f"{f} {s:,.0f} s" for f, s in files))
            fixtures = self.by_fixture.most_common(15)
            write("slowest fixture setups: " + ", ".join(f"{f} {s:,.1f} s" for f, s in fixtures))
        if self.cpu_by_file:
            costly = self.cpu_by_file.most_common(25)
            write("most CPU (files): " + ", ".join(f"{f} {s:,.1f} s" for f, s in costly))
        cpu = self.cpu_seconds()
        write(
            f"suite: {len(self.tests)} tests, {self.seconds:,.1f} s of test time, "
            f"{cpu:,.1f} s of CPU, budget {budget_seconds():g} s of CPU "
            f"(tests/{BUDGET_FILE.name}), other processes {self.others_cores(cpu):.2f} cores"
        )


TALLY = pytest.StashKey[Tally]()
LAST_TEARDOWN = "(each process's last teardown: session fixtures)"


def pytest_configure(config: pytest.Config) -> None:
    config.stash[TALLY] = Tally(config)
    config.pluginmanager.register(config.stash[TALLY], "grpo-test-budget")
