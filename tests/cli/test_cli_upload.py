"""`grpo submit` and `grpo convert --submit` upload a spec's local data file as a dataset
and submit the spec naming it, against the real service; `--no-upload` sends the path as
it is, which the server refuses saying how paths resolve and to upload (issue 44)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.api.test_api_runs import parked_spec
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final

GRPO = str(Path(sys.executable).parent / "grpo")
RECORDS = [("2+2=", "4"), ("3+5=", "8"), ("9-4=", "5")]
RECIPE = """\
model_name_or_path: builtin:tiny
dataset_name: prompts.jsonl
reward_funcs: [accuracy]
num_generations: 4
per_device_train_batch_size: 8
max_steps: 2
max_completion_length: 6
learning_rate: 0.001
save_steps: 0
output_dir: runs/cli-upload
"""


def grpo(stack: Stack, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in `cwd`, stderr a pipe (not a terminal: no progress bar)."""
    env = {**os.environ, "GRPO_URL": stack.url}
    return subprocess.run(
        [GRPO, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_convert_submit_uploads_the_recipes_local_jsonl_and_trains_on_it(
    embedded_stack: Stack, tmp_path: Path
) -> None:
    stack = embedded_stack
    records = [{"prompt": p, "solution": s} for p, s in RECORDS]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "recipe.yaml").write_text(RECIPE)

    converted = grpo(stack, tmp_path, "convert", "recipe.yaml", "-o", "spec.yaml")
    assert converted.returncode == 0, converted.stderr
    assert "source: file:prompts.jsonl" in (tmp_path / "spec.yaml").read_text()
    kept = grpo(stack, tmp_path, "submit", "spec.yaml", "--no-upload")
    assert kept.returncode == 2, kept.stdout
    assert "local dataset path 'prompts.jsonl' is outside the allowed roots" in kept.stderr
    assert "upload it as a dataset (`grpo submit` does this for you)" in kept.stderr

    done = grpo(stack, tmp_path, "convert", "recipe.yaml", "--submit", "--follow")
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = done.stdout.split()[1]
    said = [line for line in done.stderr.splitlines() if "uploaded as" in line]
    assert len(said) == 1 and "uploading" not in done.stderr, done.stderr  # no bar: a pipe
    assert said[0].startswith("data.source file:prompts.jsonl: uploaded as dataset:"), said
    assert "(3 records, " in said[0], said
    assert "#   output_dir: the service keeps" in done.stderr  # what was not mapped, still said
    with stack.client() as client:
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", run["error"]
        source = run["spec"]["data"]["source"]
        assert said[0].endswith(f"the run reads {source}") and source.startswith("dataset:")
        uploaded = next(
            d for d in client.get("/api/datasets").json()["items"] if d["source"] == source
        )
        assert (uploaded["name"], uploaded["num_records"]) == ("prompts.jsonl", 3)
        seen = []
        for step in (1, 2):
            groups = client.get(f"/api/runs/{run_id}/steps/{step}/groups").json()["items"]
            for group in groups:
                detail = client.get(f"/api/runs/{run_id}/steps/{step}/groups/{group['index']}")
                seen.append(detail.json()["prompt"])
    assert len(seen) == 4 and set(seen) <= {p for p, _ in RECORDS}, seen


def test_submit_uploads_an_eval_file_and_leaves_a_path_the_server_reads(
    embedded_stack: Stack, tmp_path: Path
) -> None:
    stack = embedded_stack
    served = stack.data_dir.resolve() / "datasets" / "served.jsonl"  # inside the server's roots
    served.parent.mkdir(exist_ok=True)
    served.write_text('{"prompt": "1+1=", "answer": "2"}\n')
    (tmp_path / "held-out.jsonl").write_text('{"q": "6-1=", "a": "5"}\n')
    spec = parked_spec(
        stack,
        data={"source": str(served)},
        eval={"source": "held-out.jsonl", "prompt_field": "q", "answer_field": "a"},
    )
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    submitted = grpo(stack, tmp_path, "submit", "spec.json")
    assert submitted.returncode == 0, submitted.stderr
    said = [line for line in submitted.stderr.splitlines() if not line.startswith("warning: ")]
    assert len(said) == 1 and said[0].startswith("eval.source held-out.jsonl: uploaded as dataset:")
    assert "(1 record, " in said[0], said
    with stack.client() as client:
        run = client.get(f"/api/runs/{submitted.stdout.split()[1]}").json()
    assert run["spec"]["data"]["source"] == str(served)
    assert run["spec"]["eval"]["source"] == said[0].rsplit(" ", 1)[1]
    assert (run["spec"]["eval"]["prompt_field"], run["spec"]["eval"]["answer_field"]) == ("q", "a")
