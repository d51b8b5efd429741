"""use_vllm on 2 gloo ranks, one colocated engine each (vLLM's external_launcher on the
trainer's process group): step 1 samples the completions one process samples, since each
completion's seed derives from its group's position in the step, never from the rank.
Engines run eagerly (vllm_enforce_eager): no graph to trace, so each of the three starts
is ~5 s, and what is sampled does not depend on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grpo.parallel.launch import init_rank, launch_ranks, leave_group
from grpo.report import StepReport
from grpo.spec import JobSpec, RegexReward
from grpo.training.trainer import TrainingLoop

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def job(ranks: int) -> JobSpec:
    return JobSpec(
        model="builtin:small", use_vllm=True, vllm_enforce_eager=True, device="cpu",
        precision="fp32", rewards=(RegexReward(pattern=r"\d"),), max_steps=1, prompts_per_step=2,
        num_generations=3, max_completion_length=6, beta=0.0, save_steps=0, save_final=False,
        logging={"max_groups_per_step": 2}, resources={"num_processes": ranks},
    )  # fmt: skip


def fit(spec: JobSpec, workdir: Path, cache: Path) -> list[StepReport]:
    reports: list[StepReport] = []
    TrainingLoop(spec, workdir=workdir, cache_dir=cache).fit(reports.append)
    return reports


def fit_rank(spec: JobSpec, workdir: Path, cache: Path) -> Any:
    ranks = init_rank("cpu")
    try:
        return fit(spec, workdir / f"rank-{ranks.rank}", cache)
    finally:
        leave_group()


def completions(report: StepReport) -> list[str]:
    return [c.text for g in report.groups for c in g.completions]


def test_two_ranks_with_an_engine_each_sample_what_one_process_does(
    tmp_path: Path, grpo_cache_dir: Path
) -> None:
    one = fit(job(1), tmp_path / "one", grpo_cache_dir)
    two = launch_ranks(fit_rank, (job(2), tmp_path / "two", grpo_cache_dir), num_processes=2,
                       run_id="test-vllm-two")  # fmt: skip
    assert len(completions(one[0])) == 6
    assert completions(two[0]) == completions(one[0])
