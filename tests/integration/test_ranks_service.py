"""A run on 2 ranks through the service: a real `celery worker` launches the ranks with
torch's elastic launcher, rank 0 alone writes to the store, and no rank outlives the run
(success, cancel, a rank killed with SIGKILL) or the worker (SIGTERM).

Ranks are found as the worker's spawned children (tests/processes.py).
"""

from __future__ import annotations

import os
import signal
import time

import httpx

from tests.integration.conftest import tiny_spec
from tests.integration.test_run_lifecycle import recorded_checkpoints, wait_for_final
from tests.integration.test_worker_resilience import wait_for_step
from tests.processes import alive, rank_processes
from tests.stack import Stack

GROUPS = 4
G = 4
LONG = 200  # steps: more than a test waits for


def ranks_spec(stack: Stack, ranks: int, **overrides: object) -> dict[str, object]:
    knobs: dict[str, object] = {
        "name": f"ranks-{ranks}",
        "max_steps": 2,
        "prompts_per_step": GROUPS,
        "num_generations": G,
        "save_steps": 0,
        "logging": {"max_groups_per_step": GROUPS},
        "resources": {"queue": stack.queue, "num_processes": ranks},
    }
    return tiny_spec(stack, **{**knobs, **overrides})


def completions(client: httpx.Client, run_id: str, step: int) -> list[tuple[str, float]]:
    groups = client.get(f"/api/runs/{run_id}/steps/{step}/groups").json()["items"]
    assert [g["index"] for g in groups] == list(range(GROUPS))  # every group, each once
    found = []
    for g in groups:
        detail = client.get(f"/api/runs/{run_id}/steps/{step}/groups/{g['index']}").json()
        found += sorted((c["text"], c["reward"]) for c in detail["completions"])
    return found


def wait_for_ranks(stack: Stack, count: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ranks = rank_processes(stack.processes["worker"].pid)
        if len(ranks) >= count:
            return ranks
        time.sleep(0.2)
    raise TimeoutError(f"the worker has not started {count} ranks\n{stack.logs()}")


def wait_gone(pids: list[int], timeout: float = 10) -> list[int]:
    """Those of `pids` still alive after up to `timeout` s (the launcher reaps them)."""
    deadline = time.monotonic() + timeout
    while (left := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_two_ranks_store_every_step_once_and_sample_what_one_process_does(
    embedded_stack: Stack,
) -> None:
    # SQLite: rank 0 writes from its own process beside the worker's heartbeat; the
    # PostgreSQL stack's ranks write steps in the tests below
    stack = embedded_stack
    with stack.client() as client:
        # precision auto: bf16 autocast on this CPU, as a user's run; 32 completions, so one
        # sample that rounds differently on a smaller batch does not fail the 95%
        wide = {"num_generations": 2 * G}
        two = client.post("/api/runs", json=ranks_spec(stack, 2, **wide))
        assert two.status_code == 201, two.text
        one = client.post("/api/runs", json=ranks_spec(stack, 1, **wide)).json()["id"]
        run = wait_for_final(client, two.json()["id"])
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        assert run["device"] == "2 ranks · cpu (gloo)"
        assert wait_for_final(client, one)["status"] == "succeeded"

        metrics = client.get(f"/api/runs/{run['id']}/metrics").json()["items"]
        assert [m["step"] for m in metrics] == [1, 2]  # each step stored once
        export = client.get(
            f"/api/runs/{run['id']}/export", params={"format": "jsonl", "what": "groups"}
        ).text
        assert len(export.splitlines()) == 2 * GROUPS
        got, expected = completions(client, run["id"], 1), completions(client, one, 1)
        assert len(got) == len(expected) == GROUPS * 2 * G
        same = sum(a == b for a, b in zip(got, expected, strict=True)) / len(got)
        print(f"\nstep 1 completions equal on 2 ranks and 1 process: {same:.3f}")
        assert same >= 0.95
        assert rank_processes(stack.processes["worker"].pid) == []


def test_cancel_stops_every_rank_between_steps(pg_stack: Stack) -> None:
    with pg_stack.client() as client:
        run_id = client.post("/api/runs", json=ranks_spec(pg_stack, 2, max_steps=LONG)).json()
        run_id = run_id["id"]
        at_cancel = wait_for_step(client, run_id, 1)
        ranks = wait_for_ranks(pg_stack, 2)
        assert len(ranks) == 2
        assert client.post(f"/api/runs/{run_id}/cancel").json()["is_cancel_requested"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "cancelled", f"{run['error']}\n{pg_stack.logs()}"
        assert run["step"] <= at_cancel["step"] + 2  # the step in flight, then the boundary
        assert wait_gone(ranks) == []
        steps = [m["step"] for m in client.get(f"/api/runs/{run_id}/metrics").json()["items"]]
        assert steps == list(range(1, run["step"] + 1))
        # rank 0 alone wrote the checkpoint at the stop, and recorded it once
        saved = recorded_checkpoints(pg_stack, run_id)
        assert [(c.step, c.is_final) for c in saved] == [(run["step"], False)]


def test_a_rank_killed_fails_the_run_naming_it_and_leaves_no_rank(pg_stack: Stack) -> None:
    with pg_stack.client() as client:
        run_id = client.post("/api/runs", json=ranks_spec(pg_stack, 2, max_steps=LONG)).json()
        run_id = run_id["id"]
        wait_for_step(client, run_id, 1)
        rank0, rank1 = wait_for_ranks(pg_stack, 2)
        os.kill(rank1, signal.SIGKILL)
        run = wait_for_final(client, run_id)
        assert run["status"] == "failed"
        assert run["error"] == (
            f"rank 1 of 2 (pid {rank1}) was killed by SIGKILL; every rank of the run was stopped"
        )
        assert wait_gone([rank0, rank1]) == []
        # the worker goes on to the next run
        healthy = client.post("/api/runs", json=tiny_spec(pg_stack, max_steps=1)).json()["id"]
        assert wait_for_final(client, healthy)["status"] == "succeeded"


def test_a_stopped_worker_hands_the_run_back_and_leaves_no_rank(pg_stack: Stack) -> None:
    with pg_stack.client() as client:
        run_id = client.post("/api/runs", json=ranks_spec(pg_stack, 2, max_steps=LONG)).json()
        run_id = run_id["id"]
        wait_for_step(client, run_id, 1)
        worker = pg_stack.processes["worker"]
        ranks = wait_for_ranks(pg_stack, 2)
        try:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=120) == 0
            assert alive(ranks) == []
            run = client.get(f"/api/runs/{run_id}").json()
            assert run["status"] == "queued", run
            logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
            assert any("handed the run back to the queue at step" in m for m in logs), logs
        finally:
            if worker.poll() is None:
                worker.kill()
            pg_stack.start_worker("worker")
        assert client.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
