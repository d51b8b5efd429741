"""TRL's side of bench/vs_trl.py: trl.GRPOTrainer in a child process, paced by the parent.

Configured to do the same work as our trainer: the same local model directory, the same
prompts in the same order (our PromptSampler's, with TRL's shuffling off), the same
accuracy reward (grpo.rewards.rules scoring), G, prompts per step, completion length, beta,
learning rate, constant schedule, AdamW, grad-norm clip 1, fp32, no gradient
checkpointing, one update per generation batch (so no old-policy pass), vLLM (colocate)
only when the configuration's trl_use_vllm is set.

A step's time is the wall clock from the parent's "go" (released in `on_step_end` of the
previous step) to this step's `on_step_end`: data loading, generation, rewards, the
reference pass, the update and TRL's per-step logging, like our side's step.
"""

from __future__ import annotations

import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

from side_protocol import (
    VLLM_MEMORY_SHARE,
    Pacer,
    RunConfig,
    limit_threads,
    memory_mb,
    quiet,
    reset_peak,
)


def trl_args(config: RunConfig, output_dir: str) -> Any:
    from trl import GRPOConfig

    n = config.completions_per_step
    return GRPOConfig(
        output_dir=output_dir,
        max_steps=config.total_steps,
        per_device_train_batch_size=n,
        generation_batch_size=n,
        gradient_accumulation_steps=1,
        num_generations=config.num_generations,
        num_iterations=1,
        max_completion_length=config.max_completion_length,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        beta=config.beta,
        epsilon=0.2,
        loss_type="grpo",
        scale_rewards="group",
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch",
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        disable_dropout=True,
        use_cpu=True,
        use_vllm=config.trl_use_vllm,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=VLLM_MEMORY_SHARE,
        shuffle_dataset=False,
        seed=config.seed,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        log_completions=False,
        dataloader_num_workers=0,
        model_init_kwargs={"dtype": "float32"},
        generation_kwargs=dict(config.trl_generation_kwargs) or None,
    )


def prompts_in_our_order(config: RunConfig) -> tuple[list[str], list[str]]:
    """The formatted prompts and answers our trainer sees at steps 1..total_steps, in order."""
    from grpo.data.loading import PromptSampler, load_examples
    from grpo.data.prompts import format_prompt
    from grpo.spec.data import DataSpec

    data = DataSpec(prompt_template=config.prompt_template, use_chat_template=False)
    sampler = PromptSampler(
        load_examples(data), batch_size=config.prompts_per_step, seed=config.seed
    )
    batch = [e for step in range(1, config.total_steps + 1) for e in sampler.batch(step)]
    return [format_prompt(e, data, None) for e in batch], [e.answer for e in batch]


def run(conn: Connection, config: RunConfig) -> None:
    limit_threads(config.threads)
    import torch

    torch.set_num_threads(config.threads)
    quiet()
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOTrainer

    from grpo.data.loading import load_examples
    from grpo.eval.greedy import greedy_accuracy
    from grpo.rewards.rules import score_completions
    from grpo.spec import AccuracyReward
    from grpo.spec.data import DataSpec

    after_imports = memory_mb()["rss"]
    prompts, answers = prompts_in_our_order(config)
    dataset = Dataset.from_dict({"prompt": prompts, "answer": answers})
    tally: dict[str, Any] = {"tokens": 0, "reward_sum": 0.0, "count": 0, "prompts": []}

    def accuracy(
        prompts: list[str], completions: list[str], completion_ids: list[list[int]], **kw: Any
    ) -> list[float]:
        """Our accuracy reward, scored by grpo.rewards.rules exactly as our trainer scores it."""
        scores = score_completions(
            completions,
            answers=kw["answer"],
            num_tokens=[len(ids) for ids in completion_ids],
            rewards=(AccuracyReward(),),
        )["accuracy"]
        tally["tokens"] += sum(len(ids) for ids in completion_ids)
        tally["reward_sum"] += sum(scores)
        tally["count"] += len(scores)
        tally["prompts"].extend(prompts)
        return scores

    pacer = Pacer(conn)

    class Pace(TrainerCallback):
        started = 0.0
        peak = 0.0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            setup = reset_peak()  # model, reference and optimizer built: training starts here
            pacer.ready(
                after_imports=after_imports, after_setup=setup["rss"], setup_peak=setup["hwm"]
            )
            self.started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            seconds = time.perf_counter() - self.started
            pacer.step(
                step=state.global_step,
                seconds=seconds,
                tokens=float(tally["tokens"]),
                reward=tally["reward_sum"] / max(1, tally["count"]),
                prompts=tally["prompts"],
            )
            tally.update(tokens=0, reward_sum=0.0, count=0, prompts=[])
            if state.global_step < config.total_steps:
                pacer.wait()
            else:
                self.peak = memory_mb()["hwm"]
            self.started = time.perf_counter()

    tokenizer = AutoTokenizer.from_pretrained(config.model_dir)
    tokenizer.padding_side = "left"
    pace = Pace()
    with tempfile.TemporaryDirectory(prefix="bench-trl-") as output_dir:
        trainer = GRPOTrainer(
            model=config.model_dir,
            reward_funcs=[accuracy],  # type: ignore[list-item]
            args=trl_args(config, output_dir),
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[pace],
        )
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        trainer.train()
    accuracy_after = None
    if config.evaluate:
        data = DataSpec(prompt_template=config.prompt_template, use_chat_template=False)
        model = trainer.model
        assert model is not None
        model.eval()
        accuracy_after = greedy_accuracy(model, tokenizer, load_examples(data, split="test"), data)
    pacer.done(peak=pace.peak, accuracy=accuracy_after, threads=torch.get_num_threads())
