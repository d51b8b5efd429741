"""Replay a run under other rewards: re-score its stored groups without training.

The completions a run kept of a step (text, token count, the rewards and advantages
training gave them) are scored by a Rewarder exactly as a step's are (grpo/rewards/
scoring.py, the records' columns from the run's own data), totalled with the entries'
weights (rules.total_rewards), and their advantages recomputed with the run's own knobs
(advantages.step_advantages). Each group says which completions' advantages changed sign
and by how much. Knows nothing of SQL, HTTP or Celery.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from grpo.algo.advantages import AdvantageKnobs, ScoredRewards, step_advantages
from grpo.data.example import Example
from grpo.data.holdout import holdout_split
from grpo.data.loading import load_nonempty
from grpo.eval.heldout import holdout_fraction
from grpo.report import histogram
from grpo.rewards.batch import RewardBatch, TrainerState
from grpo.rewards.rules import total_rewards
from grpo.rewards.scoring import Rewarder
from grpo.spec import JobSpec
from grpo.spec.sources import LocalRoots

ZERO = 1e-12
"""|advantage| at or below this has no sign (an all-equal group's 0)."""
HISTOGRAM_BINS = 20


@dataclass(frozen=True)
class StoredGroup:
    """What the store kept of one group: its place, its prompt as the policy saw it, and its
    completion documents ({text, num_tokens, rewards, reward, advantage, ...})."""

    step: int
    index: int
    prompt_id: str
    prompt: str
    answer: str
    completions: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class ReplayedGroup:
    step: int
    index: int
    prompt_id: str
    completions: list[dict[str, Any]]
    """Per completion: `rewards` (by the replay's labels), `reward`, `advantage`, and the
    stored `reward_before`, `advantage_before`."""
    flips: list[dict[str, Any]] = field(default_factory=list)
    """The completions whose advantage changed sign: {completion, advantage_before,
    advantage, change}."""


def replay_step(
    spec: JobSpec,
    rewarder: Rewarder,
    groups: Sequence[StoredGroup],
    examples: Mapping[str, Example],
    *,
    run_id: str,
    num_examples: int,
) -> list[ReplayedGroup]:
    """The groups of one step, re-scored by `rewarder` and their advantages recomputed as
    the run's step computed them; `examples` by prompt id (a prompt no longer in the data
    is scored with its stored prompt and answer, without other columns); `num_examples`:
    the training prompts, for the trainer state reward functions see."""
    step = groups[0].step
    batch = RewardBatch(
        run_id=run_id,
        step=step,
        examples=[
            examples.get(g.prompt_id) or Example(g.prompt_id, g.prompt, g.answer) for g in groups
        ],
        prompts=[g.prompt for g in groups],
        completions=[str(c["text"]) for g in groups for c in g.completions],
        num_tokens=[int(c["num_tokens"]) for g in groups for c in g.completions],
        trainer_state=TrainerState.at_step(
            step,
            max_steps=spec.max_steps,
            prompts_per_step=spec.prompts_per_step,
            num_examples=num_examples,
        ),
        answer_field=spec.data.answer_field,
    )
    scored = rewarder.score(batch)
    rewards = torch.tensor(total_rewards(scored.scores, rewarder.weights))
    rewards = rewards.view(len(groups), -1)  # (B, G)
    advantages = step_advantages(
        ScoredRewards(rewards, scored.scores, rewarder.weights), AdvantageKnobs.of(spec)
    )
    g = batch.num_generations
    return [
        replayed_group(group, scored.scores, rewards[b].tolist(), advantages[b].tolist(), b * g)
        for b, group in enumerate(groups)
    ]


def replayed_group(
    group: StoredGroup,
    scores: Mapping[str, Sequence[float | None]],
    rewards: list[float],
    advantages: list[float],
    first: int,
) -> ReplayedGroup:
    completions, flips = [], []
    for i, stored in enumerate(group.completions):
        before, after = float(stored["advantage"]), advantages[i]
        completions.append(
            {
                "rewards": {label: column[first + i] for label, column in scores.items()},
                "reward": rewards[i],
                "advantage": after,
                "reward_before": float(stored["reward"]),
                "advantage_before": before,
            }
        )
        if sign(before) != sign(after):
            flips.append(
                {"completion": i, "advantage_before": before, "advantage": after,
                 "change": after - before}
            )  # fmt: skip
    return ReplayedGroup(group.step, group.index, group.prompt_id, completions, flips)


def sign(value: float) -> int:
    return 0 if abs(value) <= ZERO else (1 if value > 0 else -1)


def replay_summary(groups: Sequence[ReplayedGroup]) -> dict[str, Any]:
    """Counts, and the distributions of rewards and advantages before and after (each pair
    over the same bins, so the histograms compare bin by bin)."""
    done = [c for g in groups for c in g.completions]
    summary: dict[str, Any] = {
        "groups": len(groups),
        "completions": len(done),
        "flipped_groups": sum(1 for g in groups if g.flips),
        "flipped_completions": sum(len(g.flips) for g in groups),
    }
    for key in ("reward", "advantage"):
        before = [float(c[f"{key}_before"]) for c in done]
        after = [float(c[key]) for c in done]
        edges = bin_edges(before + after)
        summary[f"{key}_before"] = distribution(before, edges)
        summary[key] = distribution(after, edges)
    return summary


def bin_edges(values: list[float]) -> tuple[float, ...]:
    """HISTOGRAM_BINS equal bins from the least value to the greatest (width 1 when equal)."""
    if not values:
        return ()
    low, high = min(values), max(values)
    width = (high - low) / HISTOGRAM_BINS or 1.0
    return tuple(low + width * i for i in range(HISTOGRAM_BINS + 1))


def distribution(values: list[float], edges: tuple[float, ...]) -> dict[str, Any]:
    """mean, population std, min, max, and the counts in the bins `edges` bound."""
    if not values:
        return {"mean": None, "std": None, "min": None, "max": None, "edges": [], "counts": []}
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return {"mean": mean, "std": std, "min": min(values), "max": max(values),
            "edges": list(edges), "counts": histogram(values, edges)}  # fmt: skip


def replay_examples(
    spec: JobSpec, *, datasets_dir: Path | None, roots: LocalRoots | None
) -> tuple[dict[str, Example], int]:
    """The run's records by prompt id (their columns are what reward functions are handed),
    and how many prompts it trained on (after the eval hold-out), as the Trainer loads them."""
    examples = load_nonempty(spec.data, datasets_dir, roots)
    train = holdout_split(examples, holdout_fraction(spec), seed=spec.seed)[0]
    return {e.id: e for e in examples}, len(train)
