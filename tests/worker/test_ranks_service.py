"""A run on 2 ranks through the service: a real `celery worker` launches the ranks with
torch's elastic launcher, rank 0 alone writes to the store, and no rank outlives the run
(success, cancel, a rank killed with SIGKILL) or the worker (SIGTERM). With sharding
fsdp the run succeeds the same way and its final checkpoint, gathered from the shards,
is a plain save_pretrained model.

Ranks are found as the worker's spawned children (tests/processes.py).
"""

from __future__ import annotations

import io
import os
import signal
import tarfile
import time
from pathlib import Path

import httpx
import pytest
from transformers import AutoModelForCausalLM

from tests.fixtures.service import tiny_spec
from tests.processes import alive, rank_processes
from tests.stack import Stack
from tests.worker.test_run_lifecycle import recorded_checkpoints, wait_for_final
from tests.worker.test_worker_resilience import wait_for_step

GROUPS = 4
G = 4
LONG = 200  # steps: more than a test waits for
# precision auto: bf16 autocast on this CPU, as a user's run; 32 completions, so one sample
# that rounds differently on a smaller batch does not fail the 95%
WIDE = {"num_generations": 2 * G}


def ranks_spec(
    stack: Stack, ranks: int, sharding: str = "ddp", **overrides: object
) -> dict[str, object]:
    knobs: dict[str, object] = {
        "name": f"ranks-{ranks}-{sharding}",
        "max_steps": 2,
        "prompts_per_step": GROUPS,
        "num_generations": G,
        "save_steps": 0,
        "logging": {"max_groups_per_step": GROUPS},
        "resources": {"queue": stack.queue, "num_processes": ranks, "sharding": sharding},
    }
    return tiny_spec(stack, **{**knobs, **overrides})


@pytest.fixture(scope="module")
def one_process_run(embedded_stack: Stack) -> str:
    """The WIDE run on one process that the 2-rank runs (ddp and fsdp) sample alike."""
    with embedded_stack.client() as client:
        run_id = client.post("/api/runs", json=ranks_spec(embedded_stack, 1, **WIDE)).json()
        assert wait_for_final(client, run_id["id"])["status"] == "succeeded"
        return str(run_id["id"])


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
    embedded_stack: Stack, one_process_run: str
) -> None:
    # SQLite: rank 0 writes from its own process beside the worker's heartbeat; the
    # PostgreSQL stack's ranks write steps in the tests below
    stack = embedded_stack
    with stack.client() as client:
        two = client.post("/api/runs", json=ranks_spec(stack, 2, **WIDE))
        assert two.status_code == 201, two.text
        run = wait_for_final(client, two.json()["id"])
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        assert run["device"] == "2 ranks · cpu (gloo)"
        assert_each_step_stored_once(client, run["id"])
        assert same_share(client, run["id"], one_process_run) >= 0.95
        assert rank_processes(stack.processes["worker"].pid) == []


def test_fsdp_ranks_store_every_step_once_and_save_a_plain_model(
    embedded_stack: Stack, one_process_run: str, tmp_path: Path
) -> None:
    stack = embedded_stack
    with stack.client() as client:
        fsdp = client.post("/api/runs", json=ranks_spec(stack, 2, "fsdp", **WIDE))
        assert fsdp.status_code == 201, fsdp.text
        run = wait_for_final(client, fsdp.json()["id"])
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        assert_each_step_stored_once(client, run["id"])
        # step 1 samples the initial weights, gathered whole from the shards for generation
        assert same_share(client, run["id"], one_process_run) >= 0.95
        assert rank_processes(stack.processes["worker"].pid) == []

        saved = client.get(f"/api/runs/{run['id']}/checkpoints").json()["items"]
        assert [(c["step"], c["is_final"]) for c in saved] == [(2, True)]  # written once
        archive = client.get(saved[0]["download_url"])
        assert archive.status_code == 200, archive.text
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        tar.extractall(tmp_path, filter="data")
    (folder,) = tmp_path.iterdir()
    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    assert not any(info.values()), info  # no key missing, unexpected or of a shard's shape
    assert model.num_parameters() > 0


def assert_each_step_stored_once(client: httpx.Client, run_id: str) -> None:
    metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
    assert [m["step"] for m in metrics] == [1, 2]
    export = client.get(
        f"/api/runs/{run_id}/export", params={"format": "jsonl", "what": "groups"}
    ).text
    assert len(export.splitlines()) == 2 * GROUPS


def same_share(client: httpx.Client, run_id: str, one_process: str) -> float:
    """Share of step 1's completions (text and reward) equal to the one-process run's."""
    got, expected = completions(client, run_id, 1), completions(client, one_process, 1)
    assert len(got) == len(expected) == GROUPS * 2 * G
    same = sum(a == b for a, b in zip(got, expected, strict=True)) / len(got)
    print(f"\nstep 1 completions of {run_id} equal to one process's: {same:.3f}")
    return same


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


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_a_worker_stopped_while_its_ranks_start_hands_the_run_back(
    pg_stack: Stack, how: str
) -> None:
    """Stopped before rank 0's first step (the ranks still import torch): nothing to save,
    so the ranks end at once and the run goes back to the queue, as a stop between steps
    does. Ctrl-C in a terminal reaches the whole job, ranks not yet in a group of their own
    included: their deaths must not fail the run. The worker spawns them (GRPO_PRELOAD_RUNS=0):
    forked from its server (worker/preload.py) they import nothing and would be past their
    start before a test could stop the worker."""
    worker = pg_stack.processes["worker"]
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=60)
    spawning = {"GRPO_PRELOAD_RUNS": "0"}
    worker = pg_stack.start_worker("worker", is_own_group=how == "ctrl-c", extra_env=spawning)
    with pg_stack.client() as client:
        run_id = client.post("/api/runs", json=ranks_spec(pg_stack, 2)).json()["id"]
        ranks = wait_for_ranks(pg_stack, 2)  # spawned: still importing torch, no step yet
        try:
            if how == "ctrl-c":
                os.killpg(worker.pid, signal.SIGINT)
            else:
                worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=120) == 0, pg_stack.logs()  # well within the grace
            assert alive(ranks) == []
            run = client.get(f"/api/runs/{run_id}").json()
            assert run["status"] == "queued", f"{run['error']}\n{pg_stack.logs()}"
            assert run["step"] == 0
            logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
            assert any(
                m.endswith("is stopping: handed the run back to the queue before its ranks started")
                for m in logs
            ), logs
        finally:
            if worker.poll() is None:
                worker.kill()
            pg_stack.start_worker("worker")
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{pg_stack.logs()}"
        steps = [m["step"] for m in client.get(f"/api/runs/{run_id}/metrics").json()["items"]]
        assert steps == [1, 2]  # each step stored once
        assert wait_gone(rank_processes(pg_stack.processes["worker"].pid)) == []
