"""Runs for browser tests, made and watched through the public REST API."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

FINAL = {"succeeded", "failed", "cancelled"}


def small_spec(**overrides: Any) -> dict[str, Any]:
    """Trains in seconds on the random built-in model: enough to watch curves move."""
    spec: dict[str, Any] = {
        "name": "browser-small",
        "model": "builtin:tiny",
        "max_steps": 6,
        "prompts_per_step": 3,
        "num_generations": 4,
        "max_completion_length": 8,
        "learning_rate": 1e-3,
        "save_steps": 3,
        "logging": {"max_groups_per_step": 2},
    }
    spec.update(overrides)
    return spec


def long_spec(**overrides: Any) -> dict[str, Any]:
    """Outlasts any test (tens of milliseconds a step, 2,000 steps): a live test observes it
    while it trains, however fast the machine, and ends it with `stop`."""
    return small_spec(**{"max_steps": 2000, "save_steps": 0, **overrides})


def status_of(api: httpx.Client, run_id: str) -> str:
    return str(api.get(f"/api/runs/{run_id}").json()["status"])


def submit(api: httpx.Client, spec: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/api/runs", json=spec)
    assert response.status_code == 201, response.text
    return dict(response.json())


def wait_for_run(
    api: httpx.Client, run_id: str, until: Callable[[dict[str, Any]], bool], timeout: float = 300
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = dict(api.get(f"/api/runs/{run_id}").json())
        if until(run):
            return run
        if run["status"] in FINAL:
            raise AssertionError(f"run ended {run['status']} before the condition: {run['error']}")
        time.sleep(0.5)
    raise TimeoutError(f"run {run_id} did not reach the condition in {timeout}s")


def finish(api: httpx.Client, run_id: str, timeout: float = 300) -> dict[str, Any]:
    """Waits for a final status; fails with the run's error when it did not succeed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = dict(api.get(f"/api/runs/{run_id}").json())
        if run["status"] in FINAL:
            assert run["status"] == "succeeded", run["error"]
            return run
        time.sleep(0.5)
    raise TimeoutError(f"run {run_id} not finished in {timeout}s")


def stop(api: httpx.Client, run_id: str) -> None:
    """Cancels a run (if still active) and waits until the worker has let go of it."""
    api.post(f"/api/runs/{run_id}/cancel")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if api.get(f"/api/runs/{run_id}").json()["status"] in FINAL:
            return
        time.sleep(0.5)
