"""The run doctor through the service: runs provoked into four pathologies on the built-in
warm-started model are each diagnosed by the right rule within a stated number of steps,
live, by the worker that trains them; `grpo doctor` prints the finding.

All four are the demo spec (examples/arith-demo.yaml) with one thing wrong, measured here
beforehand (2 CPU cores, fp32: the same numbers on every CPU):
- learning_rate 1e-2 (33x the demo's): KL to the reference is 3-5 nats/token from step 2;
  kl_runaway is critical at step 5, its first full window.
- G = 2 and an easy task (an answer within 10 of the sum counts): 94-100% of groups are
  all correct; no_signal is critical at step 5 and says the prompts are too easy.
- max_completion_length 2 (answers need up to 4 tokens): 82-94% of completions are cut;
  truncation is critical at step 5.
- a reward that pays for format only (an answer ending in an even digit) with an eval that
  checks answers: eval accuracy falls from 0.34 (step 0) to 0.20 by step 20 while the
  reward rises; reward_hacking opens by step 20.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.cli.test_cli_client import grpo
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final

DEMO = Path(__file__).resolve().parents[2] / "examples" / "arith-demo.yaml"
PROVOKED: dict[str, tuple[dict[str, Any], int]] = {
    "kl_runaway": ({"learning_rate": 1e-2, "max_steps": 6}, 5),
    "no_signal": ({"num_generations": 2, "rewards": [{"name": "accuracy", "tolerance": 10}],
                   "max_steps": 6}, 5),
    "truncation": ({"max_completion_length": 2, "max_steps": 6}, 5),
    "reward_hacking": ({"rewards": [{"name": "format", "pattern": r"\d*[02468]"}],
                       "eval": {"every_steps": 5, "max_examples": 100,
                                "rewards": [{"name": "accuracy"}]},
                       "max_steps": 20}, 20),
}  # fmt: skip
"""rule -> (what is wrong with the demo spec, the step by which the rule must have fired)."""


def provoked_spec(stack: Stack, rule: str) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(DEMO.read_text())
    changes, _ = PROVOKED[rule]
    return {**spec, **changes, "name": f"doctor-{rule}", "save_steps": 0, "save_final": False,
            "resources": {"queue": stack.queue}}  # fmt: skip


def test_provoked_runs_are_diagnosed_by_the_right_rule_in_time(embedded_stack: Stack) -> None:
    with embedded_stack.client() as client:
        ids = {}
        for rule in PROVOKED:  # queued together; the one worker trains them in turn
            response = client.post("/api/runs", json=provoked_spec(embedded_stack, rule))
            assert response.status_code == 201, response.text
            ids[rule] = response.json()["id"]
        for rule, run_id in ids.items():
            run = wait_for_final(client, run_id, timeout=600)
            assert run["status"] == "succeeded", run["error"]
            # marked before anyone asked for the diagnostics: the worker diagnosed it live
            assert run["doctor"] is not None, f"{rule}: no open finding after training"
            found = client.get(f"/api/runs/{run_id}/diagnostics").json()
            by_rule = {f["rule"]: f for f in found["items"]}
            assert rule in by_rule, f"{rule} not found; the doctor said {found['items']}"
            finding = by_rule[rule]
            assert finding["first_step"] <= PROVOKED[rule][1], finding
            assert finding["severity"] in ("warning", "critical") and finding["suggestions"]
        easy = {
            f["rule"]: f
            for f in client.get(f"/api/runs/{ids['no_signal']}/diagnostics").json()["items"]
        }
        assert "too easy" in easy["no_signal"]["message"]
        assert easy["no_signal"]["evidence"]["groups"], "no flat group linked"
        hacked = client.get(f"/api/runs/{ids['reward_hacking']}/diagnostics").json()["items"]
        completions = next(f for f in hacked if f["rule"] == "reward_hacking")["evidence"][
            "completions"
        ]
        assert completions and all(c["text"] != c["answer"] for c in completions)

    printed = grpo(embedded_stack, "doctor", ids["truncation"])
    assert printed.returncode == 0, printed.stderr
    assert "[truncation]" in printed.stdout
    assert f"/runs/new?from={ids['truncation']}&set=max_completion_length%3D4" in printed.stdout
