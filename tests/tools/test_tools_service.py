"""Agent rollouts through the service (issue 28): the tools demo, shortened, trains on the
real API and a real celery worker with a `python` calculator tool, and again with the
calculator as an environment; the stored trajectories replay exactly (every stored tool
result is what the tool answers to the stored call) and the tools/* metrics are stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import yaml

from grpo.data.tools_task import calc
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final

DEMO = Path(__file__).resolve().parents[2] / "examples" / "tools-demo.yaml"


def short_demo(stack: Stack, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(DEMO.read_text())
    spec.update(max_steps=2, prompts_per_step=4, num_generations=4, save_steps=0)
    return {**spec, "resources": {"queue": stack.queue}, **overrides}


def expected_result(call: dict[str, Any]) -> str:
    """What the calculator answers to a stored call, error text included."""
    if call["error"] is not None:
        return f"Error: {call['error']}"
    try:
        return calc(**call["arguments"])
    except Exception as exc:
        return f"Error: {type(exc).__name__}: {exc}"


def stored_trajectories(client: httpx.Client, run_id: str, step: int) -> list[dict[str, Any]]:
    groups = client.get(f"/api/runs/{run_id}/steps/{step}/groups").json()["items"]
    found = []
    for group in groups:
        detail = client.get(f"/api/runs/{run_id}/steps/{step}/groups/{group['index']}").json()
        found += [c["trajectory"] for c in detail["completions"] if c["trajectory"] is not None]
    return found


def test_the_tools_demo_trains_and_its_stored_trajectories_replay(embedded_stack: Stack) -> None:
    with embedded_stack.client() as client:
        python_run = client.post("/api/runs", json=short_demo(embedded_stack)).json()["id"]
        environment = short_demo(
            embedded_stack,
            name="tools-env",
            tools=[{"name": "environment", "environment": "calculator"}],
            rewards=[{"name": "python", "function": "final_answer", "label": "answer"},
                     {"name": "python", "function": "used_tool", "weight": 0.1}],
        )  # fmt: skip
        env_run = client.post("/api/runs", json=environment).json()["id"]
        for run_id in (python_run, env_run):
            run = wait_for_final(client, run_id, timeout=600)
            assert run["status"] == "succeeded", run["error"]
            metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
            assert [row["step"] for row in metrics] == [1, 2]
            for row in metrics:
                assert "tools/calls_per_trajectory" in row["metrics"]
                assert "tools/failure_rate" in row["metrics"] and "time/tools" in row["metrics"]
            trajectories = [t for s in (1, 2) for t in stored_trajectories(client, run_id, s)]
            assert len(trajectories) == 2 * 4 * 4
            calls = 0
            for trajectory in trajectories:
                for turn in trajectory["turns"]:
                    for call, result in zip(turn["calls"], turn["results"], strict=False):
                        calls += 1
                        assert result["content"] == expected_result(call)
                assert trajectory["turns"][-1]["results"] == []
            print(f"{run_id}: {calls} replayed calls")
            assert calls > 0
