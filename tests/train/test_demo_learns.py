"""Issue 16's end-to-end check, through the service: the demo spec
(examples/arith-demo.yaml, 300 steps) with `eval: {every_steps: 50, max_examples: 100}`
trains on the real API and a real celery worker; eval/accuracy is a metrics point at steps
0, 50, ..., 300 (step 0 before any training) and ends above step 0's: the demo learns on
prompts it never trained on. The final checkpoint, exported with `grpo export`, loads with
AutoModelForCausalLM and AutoTokenizer, and its greedy accuracy on the same 100 examples,
computed here in the run's compute precision (the demo pins fp32; under bf16 autocast
greedy decoding differs from fp32's on an example or two), is the stored final
eval/accuracy. The run doctor (docs/how-to/doctor.md) finds nothing above info in it.

The slowest integration test (a few minutes on 2 CPU cores): it is the demo users run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo.data.loading import load_examples
from grpo.eval.greedy import greedy_accuracy
from grpo.models.precision import autocast, compute_dtype
from grpo.spec import JobSpec
from tests.api.test_export import grpo
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final

DEMO = Path(__file__).resolve().parents[2] / "examples" / "arith-demo.yaml"
EVAL = {"every_steps": 50, "max_examples": 100}


def demo_spec(stack: Stack) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(DEMO.read_text())
    return {**spec, "eval": EVAL, "resources": {"queue": stack.queue}}


@pytest.mark.usefixtures("one_torch_thread")  # as the worker (tests/stack.py): same greedy sums
def test_the_demo_learns_and_its_exported_model_scores_what_was_stored(
    embedded_stack: Stack, tmp_path: Path
) -> None:
    spec = demo_spec(embedded_stack)
    job = JobSpec.model_validate(spec)
    assert job.max_steps == 300
    with embedded_stack.client() as client:
        run_id = client.post("/api/runs", json=spec).json()["id"]
        run = wait_for_final(client, run_id, timeout=900)
        assert run["status"] == "succeeded", run["error"]
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        evals = client.get(f"/api/runs/{run_id}/evals", params={"examples": True}).json()
        summary = client.get(f"/api/runs/{run_id}/summary").json()
        findings = client.get(f"/api/runs/{run_id}/diagnostics").json()

    curve = {row["step"]: row["metrics"]["eval/accuracy"] for row in metrics
             if "eval/accuracy" in row["metrics"]}  # fmt: skip
    print(f"eval/accuracy by step: {curve}")
    assert list(curve) == list(range(0, 301, 50))
    assert [row["step"] for row in metrics] == list(range(301))
    assert curve == {e["step"]: e["metrics"]["eval/accuracy"] for e in evals["items"]}
    assert curve[300] > curve[0]  # the demo learns
    assert summary["steps"] == 300
    assert summary["first_eval"]["step"] == 0 and summary["final_eval"]["step"] == 300
    assert (summary["checkpoint"]["step"], summary["checkpoint"]["is_final"]) == (300, True)
    # the run doctor, live in the worker all along: a healthy run gets nothing above info
    print(f"doctor: {[(f['id'], f['severity'], f['message']) for f in findings['items']]}")
    assert findings["step"] == 300
    assert [f for f in findings["items"] if f["severity"] != "info"] == []

    out = tmp_path / "model"
    exported = grpo(embedded_stack, "export", run_id, str(out))
    assert exported.returncode == 0, exported.stderr
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    examples = load_examples(job.eval_data)[: EVAL["max_examples"]]
    final = evals["items"][-1]
    assert [row["prompt_id"] for row in final["examples"]] == [e.id for e in examples]
    cpu = torch.device("cpu")
    with autocast(cpu, compute_dtype(job.precision, cpu)):
        accuracy = greedy_accuracy(
            model, tokenizer, examples, job.data, max_new_tokens=job.max_completion_length
        )
    assert accuracy == pytest.approx(curve[300], abs=1e-9)
