"""A worker whose Python environment changed under it says so once, asking for a restart,
and fails no run: the run goes back to the queue for a healthy worker, and this worker
declines every run after (worker/environment.py). Broken here as it breaks in life, in a
folder on the worker's PYTHONPATH after the worker started: a distribution the worker
imported gets another version (a dist-info, what `pip install -U` leaves), or a module the
run's code imports is shadowed by one that fails to import. A plugin installed beside the
others changes nothing."""

from __future__ import annotations

import multiprocessing
import re
import sys
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest

from grpo.parallel.kept_cause import ERROR_FILE_ENV, read_cause
from tests.fixtures.service import tiny_spec
from tests.stack import Stack, running_stack
from tests.worker.test_run_lifecycle import wait_for_final
from worker import environment
from worker.rank_entry import enter

RESTART = re.compile(
    r"the worker's Python environment changed since it started \((?P<what>.*)\); restart the "
    r"worker$"
)


def dist_info(site: Path, name: str, version: str) -> None:
    """What `pip install name==version` leaves beside the module: its metadata."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.fixture
def remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This process as a started worker: its environment remembered, an empty folder first
    on its path to change it in. Forgotten again after the test."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    environment.remember()
    yield site
    environment._started.clear()
    environment._imported.clear()
    environment._broken.clear()


def test_a_package_the_worker_imported_changing_breaks_it_and_a_new_one_does_not(
    remembered: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dist_info(remembered, "late_plugin", "0.1")
    assert environment.changes() == (["late-plugin 0.1 installed"], False)
    assert environment.problem() is None  # a plugin installed while the worker runs is fine

    was = version("pytest")  # imported by this process, as torch is by a worker
    dist_info(remembered, "pytest", "99.0")
    said = environment.problem()
    assert said is not None
    found = RESTART.match(said)
    assert found, said
    assert found["what"] == f"pytest {was} -> 99.0, late-plugin 0.1 installed"
    assert environment.problem() == said  # until restarted, whatever happens on disk
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [said]


def test_more_changes_than_a_line_holds_are_counted(remembered: Path) -> None:
    for i in range(7):
        dist_info(remembered, f"plugin{i}", "1.0")
    changed, is_imported = environment.changes()
    assert not is_imported and len(changed) == 7
    said = environment.broken("the run's process could not import the run's code: ...")
    assert said.endswith(
        "plugin3 1.0 installed, plugin4 1.0 installed and 2 more); restart the worker"
    )


def exits(code: int) -> None:
    sys.exit(code)


def test_a_run_process_that_cannot_import_the_runs_code_keeps_why_and_never_says_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """worker/rank_entry.py, in this process: the worker reads `loaded` and the kept cause."""
    error_file = tmp_path / "0" / "error.json"
    monkeypatch.setenv(ERROR_FILE_ENV, str(error_file))
    loaded = multiprocessing.get_context("spawn").Event()
    with pytest.raises(ModuleNotFoundError):
        enter(loaded, "no_such_module_of_the_run:main")
    kept = read_cause(error_file)
    assert not loaded.is_set() and kept is not None
    assert (kept.type, kept.message) == (
        "ModuleNotFoundError",
        "No module named 'no_such_module_of_the_run'",
    )

    assert enter(loaded, "json:dumps", [1]) == "[1]" and loaded.is_set()
    with pytest.raises(SystemExit):  # a plugin's sys.exit(1): where it was called is kept
        enter(loaded, f"{__name__}:exits", 1)
    kept = read_cause(error_file)
    assert kept is not None and kept.type == "SystemExit" and kept.frames[-1].function == "exits"


@pytest.fixture
def broken_later(tmp_path: Path) -> Iterator[tuple[Stack, Path]]:
    """A service whose worker has an empty folder first on its PYTHONPATH, to break later."""
    site = tmp_path / "site"
    site.mkdir()
    env = {"PYTHONPATH": str(site), "GRPO_DECLINE_PAUSE_SECONDS": "0.5"}
    with running_stack(tmp_path / "data", extra_env=env) as stack:
        yield stack, site


def wait_worker(client: httpx.Client) -> str:
    """The name of the worker once it reported itself (it remembered its environment then);
    a few seconds on a quiet machine, past 120 s on a machine loaded five times over."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if items := client.get("/api/workers").json()["items"]:
            return str(items[0]["name"])
        time.sleep(0.3)
    raise TimeoutError("no worker reported itself")


def wait_log(client: httpx.Client, run_id: str, pattern: str, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in client.get(f"/api/runs/{run_id}/logs").json()["items"]:
            if re.search(pattern, line["message"]):
                return str(line["message"])
        time.sleep(0.5)
    raise TimeoutError(f"no log line of run {run_id} matches {pattern!r}")


def said_restart(stack: Stack, name: str = "worker") -> list[str]:
    """The lines of the worker's log that ask for a restart at ERROR level."""
    text = (stack.data_dir / f"{name}.log").read_text(errors="replace")
    return [line for line in text.splitlines() if "ERROR" in line and "restart the worker" in line]


def test_a_package_upgraded_under_the_worker_leaves_runs_queued_and_asks_for_a_restart(
    broken_later: tuple[Stack, Path],
) -> None:
    stack, site = broken_later
    with stack.client() as client:
        worker = wait_worker(client)
        was = version("transformers")
        dist_info(site, "transformers", "99.0")
        first = client.post("/api/runs", json=tiny_spec(stack, max_steps=1)).json()["id"]
        said = wait_log(client, first, "left this run queued")
        second = client.post("/api/runs", json=tiny_spec(stack, max_steps=1)).json()["id"]
        wait_log(client, second, "left this run queued")
        runs = [client.get(f"/api/runs/{r}").json() for r in (first, second)]
    assert said == (
        f"worker {worker} left this run queued: the worker's Python environment changed since "
        f"it started (transformers {was} -> 99.0); restart the worker"
    )
    assert [(r["status"], r["attempts"], r["error"]) for r in runs] == [("queued", 0, None)] * 2
    assert len(said_restart(stack)) == 1, stack.logs()


def test_a_module_broken_under_the_worker_hands_the_run_back_for_a_restarted_worker(
    broken_later: tuple[Stack, Path],
) -> None:
    stack, site = broken_later
    shadow = site / "transformers.py"
    with stack.client() as client:
        worker = wait_worker(client)
        shadow.write_text("raise ImportError('transformers is broken on purpose')\n")
        run_id = client.post("/api/runs", json=tiny_spec(stack, max_steps=1)).json()["id"]
        said = wait_log(client, run_id, "handed the run back")
        assert said == (
            f"worker {worker} handed the run back: the worker's Python environment changed "
            "since it started (the run's process could not import the run's code: ImportError: "
            f"transformers is broken on purpose ({shadow}:1 in <module>)); restart the worker"
        )
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        assert (run["status"], run["error"], run["cause"]) == ("queued", None, None)
        # not forked from the server that imported transformers before it broke
        # (worker/preload.py): the run's process imported afresh, and failed
        worker_log = (stack.data_dir / "worker.log").read_text(errors="replace")
        assert f"run {run_id}: launching 1 rank (spawned)" in worker_log
        assert len(said_restart(stack)) == 1, stack.logs()

        # the environment mended: the worker still declines every run until it is
        # restarted, and a worker started now (the restart it asks for) trains the run
        shadow.unlink()
        stack.start_worker("restarted")
        done = wait_for_final(client, run_id)
    assert done["status"] == "succeeded", f"{done['error']}\n{stack.logs()}"
    assert done["worker"].startswith("restarted-")
    assert stack.processes["worker"].poll() is None and len(said_restart(stack)) == 1
