"""builtin:small through the whole service: a conversational JSONL dataset is uploaded,
trained on with micro-batches by a real worker, and the inspector shows the rendered prompt."""

from __future__ import annotations

import json

from tests.fixtures.service import tiny_spec
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final

SYSTEM = {"role": "system", "content": "Answer with one number inside <answer></answer>."}
QUESTIONS = [("What is 2+2?", "4"), ("What is 3+5?", "8"), ("What is 9-4?", "5")]


def chat_dataset() -> bytes:
    records = [
        {"prompt": [SYSTEM, {"role": "user", "content": q}], "answer": a, "id": f"q{i}"}
        for i, (q, a) in enumerate(QUESTIONS)
    ]
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def test_builtin_small_trains_on_chat_records_and_the_inspector_shows_the_rendered_prompt(
    pg_stack: Stack,
) -> None:
    stack = pg_stack
    with stack.client() as client:
        uploaded = client.post(
            "/api/datasets",
            params={"name": "chat"},
            content=chat_dataset(),
            headers={"content-type": "application/x-ndjson"},
        )
        assert uploaded.status_code == 201, uploaded.text
        spec = tiny_spec(
            stack,
            model="builtin:small",
            data={"source": uploaded.json()["source"]},
            max_steps=2,
            prompts_per_step=2,
            num_generations=3,
            micro_batch_size=4,  # 6 completions a step: one full micro-batch and a part
            max_completion_length=4,
            save_steps=0,
        )
        response = client.post("/api/runs", json=spec)
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        run = wait_for_final(client, run_id, timeout=600)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"

        groups = client.get(f"/api/runs/{run_id}/steps/1/groups").json()["items"]
        assert len(groups) == 2
        detail = client.get(f"/api/runs/{run_id}/steps/1/groups/0").json()
        question = dict(QUESTIONS)
        user = next(q for q in question if q in detail["prompt"])
        assert detail["prompt"] == (
            f"<|im_start|>system\n{SYSTEM['content']}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
        )
        assert detail["answer"] == question[user]
        assert len(detail["completions"]) == 3
        for completion in detail["completions"]:
            assert completion["finish_reason"] in ("eos", "length")
