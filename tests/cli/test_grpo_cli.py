"""The `grpo` command (grpo/cli/main.py, grpo/cli/train.py): train and eval in the
terminal; service commands are handed to app.cli / worker.cli in a new process image,
never imported."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpo.cli import main as cli
from tests.processes import rank_processes

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SPEC = """\
name: cli-test
model: builtin:tiny
max_steps: 2
prompts_per_step: 2
num_generations: 2
max_completion_length: 4
save_steps: 1
rewards:
  - name: regex
    pattern: '\\d'
"""


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["up", "--port", "9"], ["-m", "app.cli", "up", "--port", "9"]),
        (["submit", "s.yaml", "-f"], ["-m", "app.cli", "submit", "s.yaml", "-f"]),
        (["migrate"], ["-m", "app.cli", "migrate"]),
        (["worker", "--queue", "gpu"], ["-m", "worker.cli", "--queue", "gpu"]),
    ],
)
def test_service_commands_exec_their_module(monkeypatch, argv, expected):
    calls = []

    def fake_exec(file, args):
        calls.append((file, args))
        raise SystemExit(0)

    monkeypatch.setattr(cli.os, "execvp", fake_exec)
    # another test of the run may have imported app.cli already: this call must not
    monkeypatch.delitem(sys.modules, "app.cli", raising=False)
    with pytest.raises(SystemExit):
        cli.main(argv)
    assert calls == [(sys.executable, [sys.executable, *expected])]
    assert "app.cli" not in sys.modules or argv[0] == "worker"


def test_train_checkpoints_then_refuses_to_overwrite_and_resumes(tmp_path, grpo_cache_dir, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    workdir = tmp_path / "run"
    common = ["--workdir", str(workdir), "--cache-dir", str(grpo_cache_dir)]
    assert cli.main(["train", str(spec), *common]) == 0
    assert (workdir / "checkpoints" / "step-000002" / "model" / "config.json").is_file()
    assert cli.main(["train", str(spec), *common]) == 2
    assert "--resume" in capsys.readouterr().err
    assert cli.main(["train", str(spec), *common, "--resume"]) == 0
    assert "finished at step 2" in capsys.readouterr().out


def test_eval_reports_greedy_accuracy_of_a_checkpoint(tmp_path, grpo_cache_dir, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    workdir = tmp_path / "run"
    cli.main(["train", str(spec), "--workdir", str(workdir), "--cache-dir", str(grpo_cache_dir)])
    checkpoint = workdir / "checkpoints" / "step-000002"
    assert (
        cli.main(
            ["eval", "--model", str(checkpoint), "--n", "8", "--cache-dir", str(grpo_cache_dir)]
        )
        == 0
    )
    assert "greedy accuracy 0.000 on 8 builtin:arith test examples" in capsys.readouterr().out


def test_train_reports_a_failing_job_in_one_line_and_exits_1(tmp_path, grpo_cache_dir, capsys):
    spec = tmp_path / "spec.yaml"
    # lr 1 without clipping over 4 passes diverges at step 1 (as in tests/training/test_trainer.py)
    spec.write_text(
        "model: builtin:tiny\nprompts_per_step: 2\nnum_generations: 4\nmax_completion_length: 6\n"
        "rewards: [{name: regex, pattern: '\\d'}]\n"
        "learning_rate: 1.0\nmax_grad_norm: null\nnum_iterations: 4\nbeta: 0.04\n"
    )
    common = ["--workdir", str(tmp_path / "run"), "--cache-dir", str(grpo_cache_dir)]
    assert cli.main(["train", str(spec), *common]) == 1
    err = capsys.readouterr().err
    # worded as the worker words the same failure for the run page
    assert re.search(r"error: training diverged: loss is (NaN|infinite) at step 1; lower", err), err
    assert "Traceback" not in err


def test_train_on_two_ranks_reports_the_failed_rank_in_one_line_and_keeps_the_details(
    tmp_path, grpo_cache_dir
):
    # one prompt of the step has no reference answer: accuracy fails on the rank that scores
    # it, at step 1, and the other rank's collective breaks on its exit
    data = tmp_path / "prompts.jsonl"
    data.write_text(
        json.dumps({"id": "fine", "prompt": "1+1=", "answer": "2"})
        + "\n"
        + json.dumps({"id": "blank", "prompt": "2+2=", "answer": " "})
        + "\n"
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"model: builtin:tiny\ndata: {{source: {data}}}\nmax_steps: 2\nprompts_per_step: 2\n"
        "num_generations: 2\nmax_completion_length: 4\nresources: {num_processes: 2}\n"
        "rewards: [{name: accuracy}]\n"
    )
    workdir = tmp_path / "run"
    argv = ["train", str(spec), "--workdir", str(workdir), "--cache-dir", str(grpo_cache_dir)]
    process = subprocess.Popen(
        [sys.executable, "-m", "grpo.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the ranks are found by it below
    )
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    assert re.fullmatch(
        r"error: rank [01] of 2( \(pid \d+\))? failed: reward function 'accuracy' failed at "
        r"step 1 on prompt 'blank': ValueError: the reference answer is empty; accuracy needs "
        r"one for every prompt; every rank of the run was stopped",
        errors[0],
    ), stderr
    assert "FAILED" not in stderr and "Traceback" not in stderr  # nor torch's own log of it
    # torch's whole report, tracebacks included, kept in the run's directory and named
    details = re.search(r"^details: (.+)$", stderr, re.M)
    assert details, stderr
    assert Path(details[1]).parent == workdir / "ranks"
    report = Path(details[1]).read_text()
    assert "Root Cause" in report and "Traceback" in report, report
    assert "the reference answer is empty" in report
    assert rank_processes(process.pid, group=True) == []  # no rank outlived the command


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_train_in_micro_batches_of_5_gives_the_weights_of_one_pass(
    tmp_path, grpo_cache_dir, loss_type
):
    """4 prompts x G 8 = 32 completions, 5 per pass (7 passes, groups split), one step.

    The gradients agree to fp32 noise (tests/training/test_update.py), but Adam's first step
    moves every weight by about lr = 1e-3 whatever its gradient's size, so a weight whose
    gradient is itself noise (summed terms cancelling) may land up to 2 lr away. Measured:
    0.1-0.4% of each matrix beyond lr / 10; dividing each pass by its own normalizer instead
    puts 10-40% there.
    """
    weights = []
    for extra in ("", "micro_batch_size: 5\n"):
        spec = tmp_path / f"spec{len(weights)}.yaml"
        spec.write_text(
            "model: builtin:tiny\nmax_steps: 1\nprompts_per_step: 4\nnum_generations: 8\n"
            "max_completion_length: 6\nrewards: [{name: regex, pattern: '\\d'}]\n"
            f"learning_rate: 1.0e-3\nbeta: 0.04\nloss_type: {loss_type}\n{extra}"
        )
        workdir = tmp_path / f"run{len(weights)}"
        common = ["--workdir", str(workdir), "--cache-dir", str(grpo_cache_dir)]
        assert cli.main(["train", str(spec), *common]) == 0
        model = workdir / "checkpoints" / "step-000001" / "model" / "model.safetensors"
        weights.append(load_file(model))
    whole, pieces = (torch.cat([w.flatten() for w in ws.values()]) for ws in weights)
    assert ((pieces - whole).abs() > 1e-4).float().mean() < 0.01
