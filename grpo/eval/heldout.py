"""Held-out evaluation during training: the spec's eval examples sampled by the policy on
the run's device, batched like training and through training's path from prompts to
scored groups (grpo/rollout/scored_groups.py), scored by eval.rewards (default: the run's).

`eval/accuracy` is the share of samples that pass (grpo/report/outcome.py's rule: the accuracy-like
reward gives full marks, or the total reaches logging.pass_threshold); `eval/pass@k` (k =
num_samples > 1) the share of examples with at least one passing sample, the unbiased
estimator of Chen et al. 2021 (arXiv:2107.03374) at n = k; `eval/<label>/mean` each reward's
mean over the samples it applies to; `eval/reward` the mean total. Knows nothing of SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import torch

from grpo.data.example import Example
from grpo.data.holdout import holdout_split
from grpo.data.loading import load_examples
from grpo.report import EvalReport
from grpo.report.outcome import completion_passes, pass_label
from grpo.report.timing import StepClock
from grpo.rewards.batch import Scores, TrainerState
from grpo.rewards.rules import total_rewards
from grpo.rollout.policy import PolicyView
from grpo.rollout.sampling import eval_seed
from grpo.rollout.scored_groups import GroupPass, sample_groups
from grpo.spec import JobSpec
from grpo.spec.generation import GREEDY, Sampling
from grpo.spec.sources import LocalRoots


def is_eval_step(spec: JobSpec, step: int) -> bool:
    """Step 0 (before training), every `every_steps`, and the last step."""
    if spec.eval is None:
        return False
    every = spec.eval.every_steps
    return step in (0, spec.max_steps) or (every > 0 and step % every == 0)


def holdout_fraction(spec: JobSpec) -> float | None:
    """The share of the training source held out for eval (eval.holdout_fraction), if any."""
    return spec.eval.holdout_fraction if spec.eval is not None else None


def load_eval_examples(
    spec: JobSpec,
    train: Sequence[Example],
    *,
    datasets_dir: Path | None,
    roots: LocalRoots | None,
    log: Callable[[str, str], None],
) -> list[Example]:
    """The first max_examples of the eval split; prompts also trained on are reported."""
    assert spec.eval is not None
    if spec.eval.holdout_fraction is None:
        examples = load_examples(spec.eval_data, datasets_dir=datasets_dir, roots=roots)
    else:  # the share of the training source the trainer left out (the same seeded split)
        whole = load_examples(spec.data, datasets_dir=datasets_dir, roots=roots)
        examples = holdout_split(whole, spec.eval.holdout_fraction, seed=spec.seed)[1]
    examples = examples[: spec.eval.max_examples]
    if not examples:
        raise ValueError(f"eval split {spec.eval.split!r} of {spec.eval_data.source!r} is empty")
    trained = {str(e.prompt) for e in train}
    overlap = sum(str(e.prompt) in trained for e in examples)
    level = "warning" if overlap else "info"
    log(level, f"eval: {len(examples)} examples, {overlap} of them also training prompts")
    return examples


@torch.no_grad()
def evaluate(policy: PolicyView, step: int, examples: Sequence[Example]) -> EvalReport:
    """Sample, score and summarise the eval examples, a generation batch at a time."""
    spec, ev = policy.spec, policy.spec.eval
    assert ev is not None
    per_batch = max(
        1, (spec.generation_batch_size or len(examples) * ev.num_samples) // ev.num_samples
    )
    how = eval_pass(policy, step)
    texts: list[str] = []
    prompts: list[str] = []
    scores: Scores = {}
    for start in range(0, len(examples), per_batch):
        batch = list(examples[start : start + per_batch])
        groups = sample_groups(policy, batch, how, step=step, first=start, clock=StepClock())
        for label, values in groups.outcome.scores.items():
            scores.setdefault(label, []).extend(values)
        prompts += groups.prompts
        texts += groups.texts
        done = start + len(batch)
        if done < len(examples):  # the last batch's line says what the eval found
            policy.log("info", f"eval at step {step}: {done}/{len(examples)} examples")
    report = _report(policy, step, examples, prompts, texts, scores)
    found = headline(report.scalars)
    policy.log("info", f"eval at step {step}: {len(examples)}/{len(examples)} examples, {found}")
    return report


def headline(scalars: dict[str, float]) -> str:
    """`accuracy 0.613, pass@4 0.800, reward 0.613`: what an eval found, for its log line."""
    passes = sorted(key for key in scalars if key.startswith("eval/pass@"))
    keys = ["eval/accuracy", *passes, "eval/reward"]
    return ", ".join(f"{k.removeprefix('eval/')} {scalars[k]:.3f}" for k in keys if k in scalars)


def eval_pass(policy: PolicyView, step: int) -> GroupPass:
    """How held-out evaluation samples and scores (grpo/rollout/scored_groups.py, training's
    path): the run's single-turn engine, eval.rewards, eval's temperature (0: greedy;
    otherwise with the run's top_k only), num_samples per example, each example's stream
    seeded by its position in the eval split alone (the same at every eval step)."""
    spec, ev = policy.spec, policy.spec.eval
    assert ev is not None
    sampling = GREEDY if ev.temperature == 0 else Sampling(ev.temperature, top_k=spec.top_k)
    return GroupPass(
        engine=policy.eval_engine,
        rewarder=policy.eval_rewarder,
        sampling=sampling,
        num_generations=ev.num_samples,
        seed_of=partial(eval_seed, spec.seed),
        trainer_state=TrainerState(global_step=step, max_steps=spec.max_steps, epoch=0.0),
        answer_field=spec.eval_data.answer_field,
    )


def _report(
    policy: PolicyView,
    step: int,
    examples: Sequence[Example],
    prompts: list[str],
    texts: list[str],
    scores: Scores,
) -> EvalReport:
    spec = policy.spec
    k = len(texts) // len(examples)
    totals = total_rewards(scores, policy.eval_rewarder.weights)
    rewards = (spec.eval.rewards if spec.eval else None) or spec.rewards
    passes = completion_passes(
        scores, totals, label=pass_label(rewards), threshold=spec.logging.pass_threshold
    )
    scalars = {"eval/accuracy": sum(passes) / len(passes), "eval/reward": sum(totals) / len(totals)}
    for label, values in scores.items():
        applied = [v for v in values if v is not None]
        if applied:
            scalars[f"eval/{label}/mean"] = sum(applied) / len(applied)
    if k > 1:
        solved = [any(passes[i * k : (i + 1) * k]) for i in range(len(examples))]
        scalars[f"eval/pass@{k}"] = sum(solved) / len(solved)
    rows: list[dict[str, object]] = [
        {
            "prompt_id": e.id,
            "prompt": prompts[i],
            "answer": e.answer,
            "completions": texts[i * k : (i + 1) * k],
            "rewards": {label: list(v[i * k : (i + 1) * k]) for label, v in scores.items()},
            "passes": passes[i * k : (i + 1) * k],
        }  # fmt: skip
        for i, e in enumerate(examples)
    ]
    return EvalReport(step=step, scalars=scalars, examples=rows)
