"""A run on 2 ranks started by the elastic launcher (grpo/parallel/launch.py) reports the run one
process trains: the same sampled completions and rewards at step 1 (each group's stream
is seeded by its position in the step, not on its rank), every group of every rank in
rank 0's report, one checkpoint written by rank 0, and weights that match to fp32 noise.
`grpo train` with num_processes 2 launches the ranks itself; a rank that dies fails the
run with a message naming it and leaves no rank behind.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from safetensors.torch import load_file

from grpo.cli import main as cli
from grpo.parallel.launch import (
    ChildFailedError,
    RankError,
    failure_message,
    init_rank,
    launch_ranks,
    leave_group,
    worded_rank,
)
from grpo.report import StepReport
from grpo.spec import JobSpec, RegexReward
from grpo.training.trainer import TrainingLoop
from tests.processes import rank_processes
from worker import preload

pytestmark = pytest.mark.usefixtures("one_torch_thread", "preloaded_fork_server")

STEP_REL = 1e-4
"""Whole runs (mu 2, lr 0.05) with AdamW's epsilon at 1e-4: its first step moves a weight by
about lr * g / (|g| + epsilon), and with the default 1e-8 the gradient entries that cancel
to near 0 (a term every row of a group shares, times advantages that sum to 0) move by up
to lr on fp32 summation-order noise alone: ranks then differed from one process by 1.3e-4
on the loss and 1.4e-3 on weights (gradients agreeing to 3e-8). With 1e-4 those entries
stay put and the runs agree to 5.5e-6 (scalars) and 4.5e-6 (weights), measured on all of
this file's runs; a real fault (a normalizer, a rank's rows missing, gradients not summed)
moves them by percents. The 1e-6 equivalence of one update, with SGD, is
test_distributed_update's."""

WEIGHTS_ATOL = 1e-4
"""Checkpoint weights of the ranks' run against one process's (see STEP_REL)."""


def job(ranks: int, **overrides: Any) -> JobSpec:
    knobs: dict[str, Any] = dict(
        model="builtin:tiny",
        rewards=(RegexReward(pattern=r"\d"),),
        max_steps=2,
        prompts_per_step=3,
        num_generations=4,
        max_completion_length=6,
        temperature=1.5,
        learning_rate=0.05,
        beta=0.1,
        num_iterations=2,
        precision="fp32",  # bf16 autocast (auto on this CPU) rounds differently per batch shape
        adam_epsilon=1e-4,  # see STEP_REL
        micro_batch_size=5,
        scale_rewards="batch",
        save_steps=0,
        logging={"max_groups_per_step": 3},
        resources={"num_processes": ranks},
    )
    return JobSpec(**{**knobs, **overrides})


@pytest.fixture(scope="module")
def preloaded_fork_server() -> Any:
    """The ranks this module launches are forked from multiprocessing's fork server with this
    module (torch, transformers, the trainer) imported once, as the worker forks a run's
    ranks (worker/preload.py), instead of each spawned rank importing it again: about 5 s
    of CPU a rank, 9 launches of 2. `grpo train` (spawned ranks) is tested below through
    the CLI. A server some earlier test started without this module is replaced; ours is
    stopped and waited for at the end, so its ranks' CPU is counted (tests/budget.py)."""
    server = multiprocessing.forkserver._forkserver
    preloaded = list(getattr(server, "_preload_modules", ["__main__"]))
    preload.stop()
    multiprocessing.set_forkserver_preload([__name__])
    multiprocessing.forkserver.ensure_running()
    yield
    preload.stop()
    multiprocessing.set_forkserver_preload(preloaded)


def launch(entry: Any, args: tuple[Any, ...], **kwargs: Any) -> Any:
    """launch_ranks on 2 ranks forked from the preloaded fork server."""
    return launch_ranks(entry, args, num_processes=2, start_method="forkserver", **kwargs)


def fit(spec: JobSpec, workdir: Path, cache: Path) -> list[StepReport]:
    reports: list[StepReport] = []
    TrainingLoop(spec, workdir=workdir, cache_dir=cache).fit(reports.append)
    return reports


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, grpo_cache_dir) -> tuple[list[StepReport], Path]:
    """job(1)'s whole run in this process and its workdir: what the ranks' runs must match."""
    workdir = tmp_path_factory.mktemp("one")
    return fit(job(1), workdir, grpo_cache_dir), workdir


def fit_rank(spec: JobSpec, workdir: Path, cache: Path, die_at: int | None) -> Any:
    """One launched rank, living in worded_rank as `grpo train`'s and the service's ranks do;
    rank 1 kills itself at its first step when `die_at` is set."""
    with worded_rank("cpu") as ranks:
        if die_at is not None and ranks.rank == 1:
            os.kill(os.getpid(), 9)
        return fit(spec, workdir, cache)


def checkpoint_weights(workdir: Path, step: int = 2) -> dict[str, torch.Tensor]:
    return load_file(workdir / "checkpoints" / f"step-{step:06d}" / "model" / "model.safetensors")


def completions(report: StepReport) -> list[tuple[str, float]]:
    return [(c.text, c.reward) for g in report.groups for c in g.completions]


def test_two_ranks_sample_report_and_train_what_one_process_does(
    tmp_path, grpo_cache_dir, one_process
):
    one, one_dir = one_process
    args = (job(2), tmp_path / "two", grpo_cache_dir, None)
    two = launch(fit_rank, args, run_id="test-two")
    assert [r.step for r in two] == [1, 2]
    assert [g.index for g in two[0].groups] == [0, 1, 2]
    expected, got = completions(one[0]), completions(two[0])
    assert len(got) == len(expected) == 12
    assert sum(a == b for a, b in zip(got, expected, strict=True)) / 12 >= 0.95
    for key in ("reward", "reward_std", "completions/mean_length", "loss", "kl", "grad_norm"):
        assert two[0].scalars[key] == pytest.approx(one[0].scalars[key], rel=STEP_REL), key
    assert sorted(os.listdir(tmp_path / "two" / "checkpoints")) == ["step-000002"]
    assert completions(two[1]) == completions(one[1])  # step 2 samples the same weights
    for key in ("loss", "kl", "grad_norm"):
        assert two[1].scalars[key] == pytest.approx(one[1].scalars[key], rel=STEP_REL), key
    trained, reference = checkpoint_weights(tmp_path / "two"), checkpoint_weights(one_dir)
    for name, value in reference.items():
        torch.testing.assert_close(trained[name], value, atol=WEIGHTS_ATOL, rtol=0, msg=name)


def test_a_rank_that_dies_fails_the_run_and_stops_the_others(tmp_path, grpo_cache_dir):
    """Rank 0, whose collective breaks on rank 1's death, waits in worded_rank until the
    launcher has seen that death; without the wait the launcher may find both ranks ended
    at one poll and name rank 0 (a clean-clone run failed so)."""
    args = (job(2), tmp_path / "run", grpo_cache_dir, 1)
    with pytest.raises(ChildFailedError) as info:
        launch(fit_rank, args, run_id="test-die")
    assert "Signal 9" in str(info.value) or "SIGKILL" in str(info.value)
    message = failure_message(info.value, num_processes=2)
    assert message.startswith("rank 1 of 2 (pid ") and "was killed by SIGKILL" in message
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert rank_processes(os.getpid()) == []  # the launcher stopped rank 0: no orphan


def raise_on_rank_1() -> None:
    """Rank 1 fails as a worker's rank words a failure; rank 0 waits in a collective."""
    ranks = init_rank("cpu")
    if ranks.rank == 1:  # as worker/ranks.py: raised before leaving the group
        raise RankError("reward function 'digits' failed at step 1: ValueError: no")
    dist.barrier()
    leave_group()


def test_a_rank_that_raises_fails_the_run_with_its_message(tmp_path):
    with pytest.raises(ChildFailedError) as info:
        launch(raise_on_rank_1, (), run_id="test-raise", log_dir=tmp_path / "ranks")
    message = failure_message(info.value, num_processes=2)
    # rank 0's barrier breaks when rank 1 exits: the message names the cause, not that
    assert message.startswith("rank 1 of 2")
    assert message.endswith(
        " failed: reward function 'digits' failed at step 1: ValueError: no; every rank of "
        "the run was stopped"
    )
    assert list((tmp_path / "ranks").rglob("error.json"))  # the launcher's files, kept there


def test_grpo_train_launches_the_ranks_itself(tmp_path, grpo_cache_dir, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model: builtin:tiny\nmax_steps: 2\nprompts_per_step: 2\nnum_generations: 2\n"
        "max_completion_length: 4\nsave_steps: 1\nresources:\n  num_processes: 2\n"
        "rewards:\n  - name: regex\n    pattern: '\\d'\n"
    )
    workdir = tmp_path / "run"
    argv = ["train", str(spec), "--workdir", str(workdir), "--cache-dir", str(grpo_cache_dir)]
    assert cli.main(argv) == 0
    assert "launching 2 ranks" in capsys.readouterr().err
    saved = sorted(os.listdir(workdir / "checkpoints"))
    assert saved[-2:] == ["step-000001", "step-000002"]


def test_a_trainer_refuses_a_spec_for_more_ranks_than_it_has(tmp_path, grpo_cache_dir):
    with pytest.raises(ValueError, match="num_processes is 2 but this process is one of 1"):
        TrainingLoop(job(2), workdir=tmp_path, cache_dir=grpo_cache_dir)


def test_a_run_checkpointed_on_two_ranks_resumes_exactly_on_one(
    tmp_path, grpo_cache_dir, one_process
):
    uninterrupted, _ = one_process
    args = (job(2, max_steps=1, save_steps=1), tmp_path / "run", grpo_cache_dir, None)
    launch(fit_rank, args, run_id="test-resume")
    resumed = fit(job(1), tmp_path / "run", grpo_cache_dir)
    assert [r.step for r in resumed] == [2]
    assert completions(resumed[0]) == completions(uninterrupted[1])
    for key in ("loss", "kl", "grad_norm"):
        assert resumed[0].scalars[key] == pytest.approx(uninterrupted[1].scalars[key], rel=STEP_REL)


def test_ctrl_c_stops_every_rank_between_steps_with_a_checkpoint(tmp_path, grpo_cache_dir):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model: builtin:tiny\nmax_steps: 100000\nprompts_per_step: 2\nnum_generations: 2\n"
        "max_completion_length: 4\nsave_steps: 0\nresources:\n  num_processes: 2\n"
        "rewards:\n  - name: regex\n    pattern: '\\d'\n"
    )
    log = tmp_path / "out.log"
    argv = [
        sys.executable,
        "-m",
        "grpo.cli",
        "train",
        str(spec),
        "--workdir",
        str(tmp_path / "run"),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*argv, "--cache-dir", str(grpo_cache_dir)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's job
        )
    deadline = time.monotonic() + 120
    while b"reward=" not in log.read_bytes() and time.monotonic() < deadline:  # a step done
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends: the launcher and both ranks
    assert process.wait(timeout=25) == 130, log.read_text(errors="replace")[-2000:]
    assert len(os.listdir(tmp_path / "run" / "checkpoints")) == 1
    assert rank_processes(process.pid, group=True) == []  # no rank outlived the launcher


def kept_and_dropped(report: StepReport) -> list[tuple[int, str, list[float], bool]]:
    return [(g.index, g.prompt_id, g.rewards, g.is_dropped) for g in report.groups]


@pytest.mark.parametrize(
    ("max_rounds", "signal_groups"),
    [(3, 3), (1, 1)],  # 1: a step with one group of signal leaves rank 1 without a group
)
def test_dynamic_sampling_on_two_ranks_keeps_the_groups_one_process_keeps(
    tmp_path, grpo_cache_dir, max_rounds, signal_groups
):
    knobs: dict[str, Any] = dict(  # seed 2 and a leading digit: flat groups in every round
        max_steps=1,
        seed=2,
        rewards=(RegexReward(pattern=r"^\d"),),
        dynamic_sampling={"enabled": True, "max_rounds": max_rounds},
        logging={"max_groups_per_step": 16},
        num_iterations=1,  # mu 2's AdamW step would amplify the ranks' fp32 summation order
    )
    (one,) = fit(job(1, **knobs), tmp_path / "one", grpo_cache_dir)
    args = (job(2, **knobs), tmp_path / "two", grpo_cache_dir, None)
    (two,) = launch(fit_rank, args, run_id="test-dynamic")
    assert one.scalars["dynamic_sampling/rounds"] == max_rounds
    assert one.scalars["dynamic_sampling/signal_groups"] == signal_groups
    assert one.scalars["dynamic_sampling/dropped_groups"] > 0
    assert kept_and_dropped(two) == kept_and_dropped(one)
    assert completions(two) == completions(one)
    for key, value in one.scalars.items():
        if not key.startswith("time/") and key != "tokens_per_second":
            assert two.scalars[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key


def test_fsdp_on_two_ranks_trains_what_one_process_does_and_resumes_either_way(
    tmp_path, grpo_cache_dir
):
    """Sharded policy and reference (beta 0.1, mu 2, micro-batches, a TR-DPO sync at every
    step), gathered for generation; the checkpoint is a plain save_pretrained directory
    with the whole optimizer and reference state, one process resumes from it, and 2
    FSDP ranks resume from a one-process checkpoint, each step 2 sampling what the
    uninterrupted run sampled."""
    sync = dict(sync_ref_model=True, ref_model_sync_steps=1, ref_model_mixup_alpha=0.5)
    one = fit(job(1, save_steps=1, **sync), tmp_path / "one", grpo_cache_dir)
    fsdp = dict(resources={"num_processes": 2, "sharding": "fsdp"}, **sync)
    args = (job(2, max_steps=1, save_steps=1, **fsdp), tmp_path / "two", grpo_cache_dir, None)
    (two,) = launch(fit_rank, args, run_id="test-fsdp")
    assert completions(two) == completions(one[0])
    for key in ("reward", "loss", "kl", "grad_norm", "clip_ratio/region"):
        assert two.scalars[key] == pytest.approx(one[0].scalars[key], rel=STEP_REL), key
    saved = tmp_path / "two" / "checkpoints" / "step-000001"
    state = torch.load(saved / "trainer_state.pt", weights_only=False)
    moment = state["optimizer"]["state"]["model.layers.0.mlp.up_proj.weight"]["exp_avg"]
    assert moment.shape == (256, 64)  # whole, not one rank's half
    assert state["reference"]["weights"]["model.layers.0.mlp.up_proj.weight"].shape == (256, 64)
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(saved / "model").state_dict()
    single = checkpoint_weights(tmp_path / "one", 1)
    for name, value in single.items():
        torch.testing.assert_close(loaded[name], value, atol=WEIGHTS_ATOL, rtol=0, msg=name)
    resumed = fit(job(1, **sync), tmp_path / "two", grpo_cache_dir)  # 2 fsdp ranks -> 1
    assert [r.step for r in resumed] == [2]
    assert completions(resumed[0]) == completions(one[1])
    for key in ("loss", "kl", "grad_norm"):
        assert resumed[0].scalars[key] == pytest.approx(one[1].scalars[key], rel=STEP_REL), key
    start = tmp_path / "three" / "checkpoints" / "step-000001"
    shutil.copytree(tmp_path / "one" / "checkpoints" / "step-000001", start)
    args = (job(2, **fsdp), tmp_path / "three", grpo_cache_dir, None)
    (again,) = launch(fit_rank, args, run_id="test-fsdp-resume")
    assert again.step == 2 and completions(again) == completions(one[1])  # 1 -> 2 fsdp ranks
    for key in ("loss", "kl", "grad_norm"):
        assert again.scalars[key] == pytest.approx(one[1].scalars[key], rel=STEP_REL), key


def tools_job(ranks: int) -> JobSpec:
    """The tools demo, one short step: trajectories of several turns with a python tool."""
    return job(
        ranks,
        model="builtin:tiny-tools",
        data={"source": "builtin:tools"},
        tools=[{"name": "python", "function": "calc"}],
        max_tool_calling_iterations=2,
        rewards=[{"name": "python", "function": "final_answer"}],
        max_steps=1,
        max_completion_length=80,
        max_prompt_length=32,
        temperature=1.0,
        num_iterations=1,
        micro_batch_size=None,
    )


def trajectories(report: StepReport) -> list[Any]:
    return [c.trajectory for g in report.groups for c in g.completions]


def test_two_ranks_sample_the_same_tool_trajectories_as_one(tmp_path, grpo_cache_dir):
    one = fit(tools_job(1), tmp_path / "one", grpo_cache_dir)
    args = (tools_job(2), tmp_path / "two", grpo_cache_dir, None)
    two = launch(fit_rank, args, run_id="test-tools")
    assert len(trajectories(one[0])) == 12 and all(trajectories(one[0]))
    assert trajectories(two[0]) == trajectories(one[0])  # every turn, call and result
    assert completions(two[0]) == completions(one[0])
    assert (
        two[0].scalars["tools/calls_per_trajectory"] == one[0].scalars["tools/calls_per_trajectory"]
    )
