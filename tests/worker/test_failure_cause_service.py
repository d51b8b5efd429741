"""The cause of a failed run reaches its user: a reward plugin that raises fails the run, and
GET /api/runs/{id}, the run's log and `grpo logs` show the exception's type and message and
the last frames of its traceback, the plugin's own among them (file, line, function), with
the worker's secrets scrubbed. On the team deployment: PostgreSQL, Redis, a real `celery
worker` whose run's process is the one that raises (worker/rank_entry.py keeps the cause)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.service import tiny_spec
from tests.sse import read_events
from tests.stack import REDIS_URL, Stack, pg_database
from tests.worker.failing_plugin import (
    PASSWORD,
    RAISING_LINE,
    REWARDS,
    TOKEN,
    failing_plugin_stack,
)
from tests.worker.test_run_lifecycle import wait_for_final

GRPO = str(Path(sys.executable).parent / "grpo")
MESSAGE = (
    "no grader for 8 completions: token *** refused by https://grader:***@grader.example/score"
)
"""The plugin's message as a user reads it (2 prompts x 4 completions a step)."""


@pytest.fixture(scope="module")
def plugin_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Path]]:
    with (
        pg_database() as url,
        failing_plugin_stack(
            tmp_path_factory.mktemp("cause"), database_url=url, broker_url=REDIS_URL
        ) as running,
    ):
        yield running


@pytest.fixture(scope="module")
def failed_run(plugin_stack: tuple[Stack, Path]) -> dict[str, Any]:
    stack, _ = plugin_stack
    with stack.client() as client:
        response = client.post("/api/runs", json=tiny_spec(stack, max_steps=2, rewards=REWARDS))
        assert response.status_code == 201, response.text
        run = wait_for_final(client, response.json()["id"])
    assert run["status"] == "failed", f"{run['error']}\n{stack.logs()}"
    return run


def test_the_run_says_what_the_plugin_raised_and_where(
    plugin_stack: tuple[Stack, Path], failed_run: dict[str, Any]
) -> None:
    _, module = plugin_stack
    said = f"reward function 'fails' failed at step 1: LookupError: {MESSAGE}"
    assert failed_run["error"] == said
    cause = failed_run["cause"]
    assert (cause["type"], cause["message"]) == ("LookupError", MESSAGE)
    *ours, called, raised = cause["frames"]
    assert (called["file"], called["function"]) == (str(module), "fails")
    assert (raised["file"], raised["line"]) == (str(module), RAISING_LINE)
    assert raised["function"] == "_grade"
    assert raised["code"] == "raise LookupError("
    # and the frames of our code that called it, innermost last: TRL's call of the function
    assert ours[-1]["file"].endswith("grpo/rewards/trl_call.py"), ours
    assert ours[-1]["code"].startswith("return checked_scores(function(**kwargs)")
    assert cause["omitted_frames"] == 0  # the plugin was called a few frames below the catch


def test_the_run_log_and_grpo_logs_carry_the_traceback(
    plugin_stack: tuple[Stack, Path], failed_run: dict[str, Any]
) -> None:
    stack, module = plugin_stack
    with stack.client() as client:
        lines = client.get(f"/api/runs/{failed_run['id']}/logs").json()["items"]
    errors = [line["message"] for line in lines if line["level"] == "error"]
    assert errors[0] == failed_run["error"]
    trace = errors[1].splitlines()
    assert trace[0] == "Traceback (most recent call last):"
    assert trace[-3:] == [
        f'  File "{module}", line {RAISING_LINE}, in _grade',
        "    raise LookupError(",
        f"LookupError: {MESSAGE}",
    ]
    env = {**os.environ, "GRPO_URL": stack.url}
    printed = subprocess.run(
        [GRPO, "logs", failed_run["id"]], env=env, capture_output=True, text=True, timeout=120
    )
    assert printed.returncode == 0, printed.stderr
    assert f'File "{module}", line {RAISING_LINE}, in _grade' in printed.stdout
    assert f"LookupError: {MESSAGE}" in printed.stdout


def test_the_live_stream_carries_the_cause_and_no_secret_reaches_the_user(
    plugin_stack: tuple[Stack, Path], failed_run: dict[str, Any]
) -> None:
    stack, _ = plugin_stack
    with stack.client() as client:
        run = client.get(f"/api/runs/{failed_run['id']}").text
        logs = client.get(f"/api/runs/{failed_run['id']}/logs").text
        events = read_events(client, f"/api/runs/{failed_run['id']}/events")
    final = [e.data for e in events if e.kind == "status"][-1]
    assert final["status"] == "failed" and final["cause"] == failed_run["cause"]
    streamed = json.dumps([e.data for e in events])
    for shown in (run, logs, streamed):
        assert TOKEN not in shown and PASSWORD not in shown


def test_a_resumed_run_drops_the_cause_of_its_last_failure(
    plugin_stack: tuple[Stack, Path], failed_run: dict[str, Any]
) -> None:
    stack, _ = plugin_stack
    with stack.client() as client:
        resumed = client.post(f"/api/runs/{failed_run['id']}/resume").json()
        client.post(f"/api/runs/{failed_run['id']}/cancel")  # it would only fail again
    assert resumed["status"] == "queued"
    assert resumed["error"] is None and resumed["cause"] is None
