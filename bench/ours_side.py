"""Our side of bench/vs_trl.py: grpo.training.trainer.TrainingLoop in a child process, paced by the
parent.

A step's time is the wall clock from the parent's "go" to the step's report reaching the
`on_step` callback: sampling the prompts, rollout, rewards, reference pass, update and the
StepReport (groups, histograms) the product builds every step.
"""

from __future__ import annotations

import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from side_protocol import (
    VLLM_MEMORY_SHARE,
    Pacer,
    RunConfig,
    limit_threads,
    memory_mb,
    quiet,
    reset_peak,
)


def run(conn: Connection, config: RunConfig) -> None:
    limit_threads(config.threads)
    import torch

    torch.set_num_threads(config.threads)
    quiet()
    from grpo.data.loading import load_examples
    from grpo.eval.greedy import greedy_accuracy
    from grpo.report import StepReport
    from grpo.spec import AccuracyReward, JobSpec
    from grpo.spec.data import DataSpec
    from grpo.training.trainer import TrainingLoop

    after_imports = memory_mb()["rss"]
    data = DataSpec(prompt_template=config.prompt_template, use_chat_template=False)
    spec = JobSpec(
        model=config.model_dir,
        data=data,
        rewards=(AccuracyReward(),),
        max_steps=config.total_steps,
        prompts_per_step=config.prompts_per_step,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        beta=config.beta,
        learning_rate=config.learning_rate,
        precision="fp32",
        seed=config.seed,
        save_steps=0,
        device="cpu",
        use_vllm=config.use_vllm,
        vllm_gpu_memory_utilization=VLLM_MEMORY_SHARE,
    )
    pacer = Pacer(conn)
    with tempfile.TemporaryDirectory(prefix="bench-ours-") as workdir:
        trainer = TrainingLoop(spec, workdir=Path(workdir), cache_dir=Path(workdir) / "cache")
        setup = reset_peak()  # the peak from here on is what training costs
        pacer.ready(after_imports=after_imports, after_setup=setup["rss"], setup_peak=setup["hwm"])
        started, peak = time.perf_counter(), 0.0

        def on_step(report: StepReport) -> None:
            nonlocal started, peak
            seconds = time.perf_counter() - started
            tokens = report.scalars["completions/mean_length"] * config.completions_per_step
            pacer.step(
                step=report.step,
                seconds=seconds,
                tokens=tokens,
                reward=report.scalars["reward"],
                prompts=[group.prompt for group in report.groups],
                phases={k: v for k, v in report.scalars.items() if k.startswith("time/")},
            )
            if report.step < config.total_steps:
                pacer.wait()
            else:  # before fit's final checkpoint, which TRL (save_strategy="no") never writes
                peak = memory_mb()["hwm"]
            started = time.perf_counter()

        trainer.fit(on_step, resume=False)
        accuracy = None
        if config.evaluate:
            trainer.model.eval()
            accuracy = greedy_accuracy(
                trainer.model, trainer.tokenizer, load_examples(data, split="test"), data
            )
    pacer.done(peak=peak, accuracy=accuracy, threads=torch.get_num_threads())
