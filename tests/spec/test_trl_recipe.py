"""A TRL recipe through the service: reward functions written as public TRL GRPO recipes write
them (examples/reward-plugin/grpo_example_rewards/trl_recipe.py: a `solution` column,
completion_ids, trainer_state.global_step, two `async def`, log_metric and log_extra) train a
run on an uploaded chat-format dataset, and every stored per-label reward is the function's
own answer, recomputed here from the stored texts."""

from __future__ import annotations

import json
import re
from typing import Any

from grpo_example_rewards import trl_recipe

from tests.fixtures.service import tiny_spec
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final

QUESTIONS = [("What is 2+2?", "4"), ("What is 3+5?", "8"), ("What is 9-4?", "5")]
REWARDS = [
    {"name": "python", "function": "trl_accuracy", "label": "accuracy"},
    {"name": "python", "function": "trl_short", "label": "short", "weight": 0.5},
    {"name": "python", "function": "trl_scheduled", "label": "scheduled", "weight": 0.1},
    {"name": "python", "function": "trl_async_judge", "label": "judge"},
    {"name": "python", "function": "trl_async_format", "label": "format"},
]


def chat_records() -> bytes:
    records = [
        {"prompt": [{"role": "user", "content": q}], "solution": a, "level": i}
        for i, (q, a) in enumerate(QUESTIONS)
    ]
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def expected_scores(text: str, num_tokens: int, solution: str, step: int) -> dict[str, float]:
    """Each function's own answer for one completion, called as TRL calls it."""
    completion = [[{"role": "assistant", "content": text}]]
    logged: dict[str, Any] = {}
    kwargs: dict[str, Any] = {
        "log_metric": lambda name, value: logged.setdefault(name, value),
        "log_extra": lambda column, values: logged.setdefault(column, values),
    }
    state = type("State", (), {"global_step": step - 1})()
    return {
        "accuracy": trl_recipe.accuracy_reward(completion, [solution], **kwargs)[0],
        "short": trl_recipe.short_completion_reward([[0] * num_tokens])[0],
        "scheduled": trl_recipe.scheduled_reward(completion, state)[0],
        "judge": min(1.0, len(text) / 20.0),
        "format": float(any(ch.isdigit() for ch in text)),
    }


def test_a_trl_recipe_trains_through_the_service_unchanged(pg_stack: Stack) -> None:
    stack = pg_stack
    with stack.client() as client:
        uploaded = client.post(
            "/api/datasets",
            params={"name": "trl-chat", "answer_field": "solution"},
            content=chat_records(),
            headers={"content-type": "application/x-ndjson"},
        )
        assert uploaded.status_code == 201, uploaded.text
        spec = tiny_spec(
            stack,
            model="builtin:small",
            data={"source": uploaded.json()["source"], "answer_field": "solution"},
            rewards=REWARDS,
            max_steps=2,
            num_generations=3,
            max_completion_length=4,
            save_steps=0,
        )
        response = client.post("/api/runs", json=spec)
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        run = wait_for_final(client, run_id, timeout=600)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"

        solutions = dict(QUESTIONS)
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        for row in metrics:
            step, scalars = row["step"], row["metrics"]
            checked = 0
            for group in client.get(f"/api/runs/{run_id}/steps/{step}/groups").json()["items"]:
                detail = client.get(f"/api/runs/{run_id}/steps/{step}/groups/{group['index']}")
                detail_json = detail.json()
                question = next(q for q in solutions if q in detail_json["prompt"])
                for c in detail_json["completions"]:
                    want = expected_scores(c["text"], c["num_tokens"], solutions[question], step)
                    assert c["rewards"] == want, c
                    last = (re.findall(r"-?\d+", c["text"]) or [""])[-1]
                    assert c["extras"] == {"last_number": last}  # log_extra's column
                    checked += 1
            assert checked == 2 * 3  # every completion of the step's two groups
            # log_metric: charted from the step's metrics like any other
            assert 0.0 <= scalars["rewards/accuracy/has_number"] <= 1.0
            # the two async functions waited 0.3 s each, together: one woke to find the
            # other still waiting (one after the other, each would find none)
            wait = trl_recipe.ASYNC_SLEEP_S
            assert scalars["time/reward/judge"] >= wait and scalars["time/reward/format"] >= wait
            peers = [scalars[f"rewards/{label}/peers_in_flight"] for label in ("judge", "format")]
            assert max(peers) > 0, peers
