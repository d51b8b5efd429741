"""The CLI's client commands against the real service: submit --follow, runs, logs, cancel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.service import tiny_spec
from tests.stack import Stack

GRPO = str(Path(sys.executable).parent / "grpo")


def grpo(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRPO_URL": stack.url}
    return subprocess.run([GRPO, *args], env=env, capture_output=True, text=True, timeout=300)


def test_submit_follow_runs_logs_and_cancel(embedded_stack: Stack, tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(json.dumps(tiny_spec(embedded_stack, name="cli-follow", max_steps=3)))
    followed = grpo(embedded_stack, "submit", str(spec_file), "--follow")
    assert followed.returncode == 0, followed.stderr
    run_id = followed.stdout.split()[1]
    assert f"run {run_id} succeeded" in followed.stdout
    assert "3/3" in followed.stderr  # the progress bar reached the last step

    listed = grpo(embedded_stack, "runs")
    assert run_id in listed.stdout and "succeeded" in listed.stdout
    logs = grpo(embedded_stack, "logs", run_id)
    assert "model loaded" in logs.stdout

    parked = tmp_path / "parked.yaml"
    parked.write_text(json.dumps(tiny_spec(embedded_stack, resources={"queue": "parked"})))
    parked_id = grpo(embedded_stack, "submit", str(parked)).stdout.split()[1]
    cancelled = grpo(embedded_stack, "cancel", parked_id)
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout

    bad = tmp_path / "bad.yaml"
    bad.write_text("num_generations: 1\nper_device_train_batch_size: 4\n")
    rejected = grpo(embedded_stack, "submit", str(bad))
    assert rejected.returncode == 2 and "num_generations" in rejected.stderr
    with embedded_stack.client() as client:
        answer = client.post(
            "/api/runs", json={"num_generations": 1, "per_device_train_batch_size": 4}
        )
    problems = answer.json()["error"]["fields"]
    assert len(problems) == 2
    # each problem printed once, on a line of its own (the message's summary repeated them)
    assert rejected.stderr.startswith("error: invalid job spec:\n"), rejected.stderr
    for problem in problems:
        assert rejected.stderr.count(problem["message"]) == 1, rejected.stderr
        assert f"\n  {problem['loc']}: {problem['message']}" in rejected.stderr


def test_resume_clone_and_datasets(embedded_stack: Stack, tmp_path: Path) -> None:
    data = tmp_path / "sums.jsonl"
    data.write_text('{"q": "2+2=", "a": "4"}\n{"q": "3+5=", "a": "8"}\n')
    upload = ["datasets", "upload", str(data), "--prompt-field", "q", "--answer-field", "a"]
    uploaded = grpo(embedded_stack, *upload)
    assert uploaded.returncode == 0, uploaded.stderr
    assert "'sums': 2 records, fields a, q" in uploaded.stdout
    source = uploaded.stdout.split("source: ")[1].split(",")[0]
    assert source.startswith("dataset:")
    listed = grpo(embedded_stack, "datasets", "list")
    assert f"{source}        2 records  sums  (fields a, q)" in listed.stdout

    parked = tmp_path / "parked.yaml"
    parked.write_text(json.dumps(tiny_spec(embedded_stack, resources={"queue": "parked"})))
    run_id = grpo(embedded_stack, "submit", str(parked)).stdout.split()[1]
    assert grpo(embedded_stack, "cancel", run_id).returncode == 0
    resumed = grpo(embedded_stack, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {run_id} queued: restarts from step 0: no checkpoint was saved" in resumed.stdout
    again = grpo(embedded_stack, "resume", run_id)  # queued already: the API's 409, worded
    assert again.returncode == 2 and "only cancelled or failed runs resume" in again.stderr

    cloned = grpo(
        embedded_stack, "clone", run_id, "--set", "max_steps=2", "--set", "data.split=test"
    )
    assert cloned.returncode == 0, cloned.stderr
    clone_id = cloned.stdout.split()[1]
    with embedded_stack.client() as client:
        spec = client.get(f"/api/runs/{clone_id}").json()["spec"]
    assert (spec["max_steps"], spec["data"]["split"]) == (2, "test")
    typo = grpo(embedded_stack, "clone", run_id, "--set", "num_generation=4")
    assert typo.returncode == 2 and "did you mean num_generations?" in typo.stderr
    assert grpo(embedded_stack, "cancel", clone_id).returncode == 0
    assert grpo(embedded_stack, "cancel", run_id).returncode == 0
