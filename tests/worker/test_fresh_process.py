"""Each run trains in a fresh process of its own (worker/job.py): a reward plugin installed
while the worker runs is used by the next run, from a process that is not the worker's, and
a run whose process crashes (a segfault in native code) fails cleanly while the same
worker goes on with the next run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.service import tiny_spec
from tests.stack import Stack, running_stack
from tests.worker.test_run_lifecycle import wait_for_final

PLUGIN = """\
import ctypes
import os
from pathlib import Path


def late_reward(prompts, completions, **kwargs):
    Path(os.environ["LATE_PLUGIN_PIDS"]).open("a").write(f"{os.getpid()}\\n")
    return [1.0 if c.strip() else 0.0 for c in completions]


def crash(prompts, completions, **kwargs):
    ctypes.string_at(0)  # SIGSEGV: what a broken native extension does
"""


def install_plugin(site: Path) -> None:
    """What `pip install` leaves: the module and its dist-info with the entry points."""
    (site / "late_plugin.py").write_text(PLUGIN)
    info = site / "late_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: late-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[grpo.rewards]\nlate_reward = late_plugin:late_reward\ncrash = late_plugin:crash\n"
    )


@pytest.fixture
def plugin_stack(tmp_path: Path) -> Iterator[tuple[Stack, Path]]:
    site = tmp_path / "site"
    site.mkdir()
    env = {"PYTHONPATH": str(site), "LATE_PLUGIN_PIDS": str(tmp_path / "pids")}
    with running_stack(tmp_path / "data", extra_env=env) as stack:
        yield stack, site


def test_a_plugin_installed_while_the_worker_runs_is_used_by_the_next_run(
    plugin_stack: tuple[Stack, Path], tmp_path: Path
) -> None:
    stack, site = plugin_stack
    with stack.client() as client:
        first = client.post("/api/runs", json=tiny_spec(stack, max_steps=1)).json()["id"]
        assert wait_for_final(client, first)["status"] == "succeeded"  # the worker is up
        install_plugin(site)
        rewards = [{"name": "python", "function": "late_reward"}]
        spec = tiny_spec(stack, max_steps=2, rewards=rewards)
        response = client.post("/api/runs", json=spec)
        assert response.status_code == 201, response.text
        run = wait_for_final(client, response.json()["id"])
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
    pids = {int(p) for p in (tmp_path / "pids").read_text().split()}
    assert pids and stack.processes["worker"].pid not in pids  # a process of the run's own


def test_a_run_that_segfaults_fails_cleanly_and_the_worker_takes_the_next(
    plugin_stack: tuple[Stack, Path],
) -> None:
    stack, site = plugin_stack
    install_plugin(site)
    with stack.client() as client:
        spec = tiny_spec(stack, max_steps=2, rewards=[{"name": "python", "function": "crash"}])
        crashed = wait_for_final(client, client.post("/api/runs", json=spec).json()["id"])
        assert crashed["status"] == "failed"
        assert crashed["error"].startswith("the run's process was killed by SIGSEGV"), crashed
        healthy = client.post("/api/runs", json=tiny_spec(stack, max_steps=1)).json()["id"]
        done = wait_for_final(client, healthy)
        assert done["status"] == "succeeded", f"{done['error']}\n{stack.logs()}"
        assert done["worker"] == crashed["worker"]
    assert stack.processes["worker"].poll() is None
