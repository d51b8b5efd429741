"""Eval in the spec, the trackers and `grpo export` against the real service, on 4 steps:
eval/accuracy is stored (in the metrics, step 0 included, the live stream, TensorBoard,
MLflow and the offline W&B run, with every step's reward) at steps 0, 2 and 4; the final
checkpoint arrives (resuming a cut download) in a directory that AutoModelForCausalLM and
AutoTokenizer load, with the trained weights. That the exported model scores the stored
eval/accuracy, on the demo that learns, is tests/train/test_demo_learns.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import torch
from mlflow.tracking import MlflowClient
from safetensors.torch import load_file
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo.client import GrpoClient
from tests.fixtures.service import tiny_spec
from tests.stack import Stack
from tests.tracker_logs import wandb_exit_code, wandb_logs, wandb_metric
from tests.worker.test_run_lifecycle import wait_for_final

GRPO = str(Path(sys.executable).parent / "grpo")


def grpo(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRPO_URL": stack.url}
    return subprocess.run([GRPO, *args], env=env, capture_output=True, text=True, timeout=300)


def test_eval_and_export_of_the_final_model(embedded_stack: Stack, tmp_path: Path) -> None:
    spec = tiny_spec(
        embedded_stack, name="export", model="builtin:tiny-arith", max_steps=4, save_steps=2,
        max_completion_length=6, learning_rate=3e-4,
        eval={"every_steps": 2, "max_examples": 16},
        logging={"report_to": ["tensorboard", "mlflow", "wandb"]},
    )  # fmt: skip
    with embedded_stack.client() as client:
        run_id = client.post("/api/runs", json=spec).json()["id"]
        assert wait_for_final(client, run_id)["status"] == "succeeded"
        evals = client.get(f"/api/runs/{run_id}/evals", params={"examples": True}).json()
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        listed = client.get(f"/api/runs/{run_id}/checkpoints").json()["items"]
        archive = client.get(f"/api/runs/{run_id}/checkpoints/latest/download").content
        logs = [line["message"] for line in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
    assert [e["step"] for e in evals["items"]] == [0, 2, 4]
    streamed = [
        data for kind, data in GrpoClient(embedded_stack.url).events(run_id) if kind == "eval"
    ]
    assert [(e["step"], e["metrics"]) for e in streamed] == [
        (e["step"], e["metrics"]) for e in evals["items"]
    ]  # the live stream carries each evaluation, step 0 included
    final = evals["items"][-1]
    by_step = {row["step"]: row["metrics"] for row in metrics}
    assert by_step[0] == evals["items"][0]["metrics"]  # step 0: the evaluation, nothing else
    assert by_step[4]["eval/accuracy"] == final["metrics"]["eval/accuracy"]
    assert "eval/accuracy" not in by_step[1] and "eval/accuracy" in by_step[2]
    assert "eval: 16 examples, 0 of them also training prompts" in logs
    assert [(c["step"], c["is_final"]) for c in listed] == [(2, False), (4, True)]
    board = EventAccumulator(str(embedded_stack.data_dir / "runs" / run_id / "tensorboard"))
    board.Reload()
    assert [s.step for s in board.Scalars("eval/accuracy")] == [0, 2, 4]
    assert [s.step for s in board.Scalars("reward")] == [1, 2, 3, 4]
    tracking = MlflowClient(f"sqlite:///{embedded_stack.data_dir / 'runs' / run_id / 'mlflow.db'}")
    (tracked,) = tracking.search_runs([tracking.get_experiment_by_name("grpo").experiment_id])
    assert tracked.info.run_name == run_id and tracked.info.status == "FINISHED"
    accuracy = tracking.get_metric_history(tracked.info.run_id, "eval/accuracy")
    assert sorted((m.step, m.value) for m in accuracy) == [
        (e["step"], e["metrics"]["eval/accuracy"]) for e in evals["items"]
    ]
    (wandb_log,) = wandb_logs(embedded_stack.data_dir / "runs" / run_id)  # WANDB_MODE=offline
    assert wandb_exit_code(wandb_log) == 0
    rewards = wandb_metric([wandb_log], "reward")
    assert rewards == [(step, by_step[step]["reward"]) for step in (1, 2, 3, 4)]
    assert wandb_metric([wandb_log], "eval/accuracy") == [
        (e["step"], e["metrics"]["eval/accuracy"]) for e in evals["items"]
    ]

    out = tmp_path / "model"
    out.mkdir()
    (out / f".{run_id}-latest.tar.gz.part").write_bytes(archive[: len(archive) // 2])
    exported = grpo(embedded_stack, "export", run_id, str(out))
    assert exported.returncode == 0, exported.stderr
    assert f"{run_id}-step-000004.tar.gz" in exported.stdout
    assert not list(out.glob(".*.part"))

    model = AutoModelForCausalLM.from_pretrained(out)
    assert AutoTokenizer.from_pretrained(out).pad_token_id is not None  # it came with the model
    saved = embedded_stack.data_dir / "runs" / run_id / "checkpoints" / "step-000004" / "model"
    for name, tensor in load_file(str(saved / "model.safetensors")).items():
        torch.testing.assert_close(model.state_dict()[name], tensor, rtol=0, atol=0)

    missing = grpo(embedded_stack, "export", run_id, str(tmp_path / "x"), "--step", "1")
    assert missing.returncode == 2 and "no checkpoint at step 1" in missing.stderr
    nine = httpx.get(f"{embedded_stack.url}/api/runs/{run_id}/checkpoints/9/download")
    assert nine.status_code == 404
