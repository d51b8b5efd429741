"""A worker's runs are forked from a server that has the run's code imported (worker/preload.py)
while what the worker imported is still what an import finds, and spawned to import afresh
once it is not (a module shadowed or an own source file edited since the worker started).
The spawned case through a service is tests/worker/test_worker_environment.py's broken
module (its run is handed back, as the worker log's "spawned" there shows)."""

from __future__ import annotations

import importlib.util
import multiprocessing.forkserver
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.fixtures.service import tiny_spec
from tests.processes import FORK_SERVER
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final
from tests.worker.test_worker_environment import wait_worker
from worker import preload
from worker.fork_server import fork_server_here


@pytest.fixture
def remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This process as a started worker: its imports remembered, an empty folder first on
    its path. Forgotten after the test (the fork server is never started here)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    preload.remember()
    yield site
    preload._started.clear()
    preload._since.clear()


def test_nothing_changed_then_a_module_shadowed_on_the_path_is_seen(remembered: Path) -> None:
    assert preload._changed() is None
    assert "httpx" in preload._started  # imported from a file by this process, as torch is
    (remembered / "httpx.py").write_text("raise ImportError('shadowed')\n")
    found = preload._changed()
    assert found == (
        f"`import httpx` finds {remembered / 'httpx.py'} where it found {preload._started['httpx']}"
    )
    assert preload.start_method() == "spawn"


def test_an_own_source_file_edited_since_the_start_is_seen(remembered: Path) -> None:
    own = Path(preload.__file__)
    was = own.stat()
    os.utime(own, (was.st_atime, preload._since[0] + 1))  # as an editor's save leaves it
    try:
        assert preload._changed() == f"{own} changed"
        assert preload.start_method() == "spawn"
    finally:
        os.utime(own, ns=(was.st_atime_ns, was.st_mtime_ns))


def test_a_process_that_is_no_started_worker_spawns() -> None:
    assert not preload._since and preload.start_method() == "spawn"


def test_runs_on_one_worker_are_forked_from_its_server_and_train_alike(
    embedded_stack: Stack,
) -> None:
    """Two runs of one spec, one after the other on the same worker's server (the default):
    the second is not changed by what the first left in the server (none of its state is)."""
    stack = embedded_stack
    with stack.client() as client:
        runs = {}
        for _ in range(2):
            run_id = client.post("/api/runs", json=tiny_spec(stack, max_steps=2)).json()["id"]
            run = wait_for_final(client, run_id)
            assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
            runs[run_id] = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
    log = (stack.data_dir / "worker.log").read_text(errors="replace")
    for run_id in runs:
        said = re.findall(rf"run {run_id}: launching 1 rank \((.*?)\)", log)
        assert said == ["forked with the run's code preloaded"], log[-3000:]
    key = ("reward", "reward_std", "kl", "loss")
    first, second = ([[m["metrics"][k] for k in key] for m in items] for items in runs.values())
    assert len(first) == 2 and first == second


def fork_servers(worker: int) -> list[psutil.Process]:
    return [
        c
        for c in psutil.Process(worker).children()
        if FORK_SERVER.decode() in " ".join(c.cmdline())
    ]


def test_the_worker_forks_its_fork_server_from_itself_and_every_run_uses_that_one(
    embedded_stack: Stack,
) -> None:
    """worker/fork_server.py: the server is a child of the worker that imported nothing (its
    own CPU time is under a second, where importing torch alone takes more), and a run's
    rank is forked from it: after the run it is still the worker's one server."""
    stack = embedded_stack
    worker = stack.processes["worker"].pid
    with stack.client() as client:
        wait_worker(client)  # the server is forked before the worker reports itself
        (server,) = fork_servers(worker)
        run_id = client.post("/api/runs", json=tiny_spec(stack, max_steps=1)).json()["id"]
        run = wait_for_final(client, run_id)
    assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
    log = (stack.data_dir / "worker.log").read_text(errors="replace")
    said = re.findall(rf"run {run_id}: launching 1 rank \((.*?)\)", log)
    assert said == ["forked with the run's code preloaded"], log[-3000:]
    assert [p.pid for p in fork_servers(worker)] == [server.pid]
    own = server.cpu_times()
    assert own.user + own.system < 1.0, own


def test_no_fork_server_is_forked_where_multiprocessing_authenticates_its_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Newer Pythons' fork server checks a key its clients hold; worker/fork_server.py speaks
    3.11's protocol, so there it leaves the server to multiprocessing (nothing imported,
    nothing forked)."""
    server = multiprocessing.forkserver._forkserver
    running = getattr(server, "_forkserver_pid", None)  # another test's, in this process
    monkeypatch.setattr(server, "_forkserver_authkey", None, raising=False)
    assert fork_server_here() is None
    assert getattr(server, "_forkserver_pid", None) == running


def test_a_module_held_under_a_second_top_level_name_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vllm puts vllm.model_executor.layers.quantization in sys.modules as `model_executor`
    too; no import finds that name, which once read as a module gone (CI of stop 47)."""
    import email.mime.text

    monkeypatch.setitem(sys.modules, "mime_alias", email.mime.text)
    monkeypatch.syspath_prepend(str(tmp_path))
    preload.remember()
    try:
        assert "mime_alias" not in preload._started and "email" in preload._started
        assert preload._changed() is None
    finally:
        preload._started.clear()
        preload._since.clear()


def test_a_module_loaded_from_its_file_by_location_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin folder's reward file is loaded by its location under a top-level name that
    no import finds; remembered, it read as a module gone, and every later run of the worker
    was spawned (a plugin test before these in one process of the suite found it)."""
    plugin = tmp_path / "short.py"
    plugin.write_text("def short(completions, **kw):\n    return [1.0 for _ in completions]\n")
    spec = importlib.util.spec_from_file_location("grpo_plugin_by_location", plugin)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "grpo_plugin_by_location", module)
    preload.remember()
    try:
        assert "grpo_plugin_by_location" not in preload._started and "httpx" in preload._started
        assert preload._changed() is None
    finally:
        preload._started.clear()
        preload._since.clear()
