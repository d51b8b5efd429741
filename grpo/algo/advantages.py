"""Advantage estimators: how a step's scored completions become the advantages the loss
weighs, each one pure tensor math in one registry (as verl's `register_adv_est`).

Each estimator is a function registered under its name by `register_advantage`, together
with the spec knob value that chooses it (the spec names no estimator: TRL's
`scale_rewards` and `multi_objective_aggregation` do). `step_advantages` is the one call
site: it looks the spec's choice up (`estimator_name`), runs the estimator and clips.
Adding one is a function here with its decorator, and a value of the knob that chooses it.
Knows nothing of models.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor

if TYPE_CHECKING:
    from grpo.spec.algorithm import AlgorithmKnobs


def population_std(values: Tensor) -> Tensor:
    """Population std of a flat tensor (0 when empty)."""
    return values.std(correction=0) if values.numel() else values.new_zeros(())


BatchStd = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class ScoredRewards:
    """What every estimator is given: a step's B groups of G scored completions."""

    rewards: Tensor
    """(B, G) the weighted totals (rules.total_rewards), group-major."""
    scores: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    """Per reward function (by label), B x G scores, group-major; None: not applicable."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """Each reward function's weight, by label."""


class Estimator(Protocol):
    """scored (B groups of G) -> advantages (B, G); `eps` keeps a zero std finite,
    `batch_std` is the population std of a flat tensor over the whole step (every rank's
    when the step's groups are split across processes: distributed.Ranks.population_std)."""

    def __call__(self, scored: ScoredRewards, *, eps: float, batch_std: BatchStd) -> Tensor: ...


@dataclass(frozen=True)
class AdvantageKnobs:
    """The spec's advantage knobs, whole: the two that choose the estimator, its eps, and
    the clip (AlgorithmKnobs' multi_objective_aggregation, scale_rewards, advantage_eps,
    advantage_clip)."""

    aggregation: str = "sum_then_normalize"
    scale: str = "group"
    eps: float = 1e-8
    clip: float | None = None

    @classmethod
    def of(cls, knobs: AlgorithmKnobs) -> AdvantageKnobs:
        return cls(
            knobs.multi_objective_aggregation,
            knobs.scale_rewards,
            knobs.advantage_eps,
            knobs.advantage_clip,
        )


ESTIMATORS: dict[str, Estimator] = {}
"""Every advantage estimator, by name (register_advantage fills it)."""
CHOSEN_BY: dict[tuple[str, str], str] = {}
"""(spec knob, value) -> the name of the estimator that value chooses."""
CHOOSING_KNOBS = ("multi_objective_aggregation", "scale_rewards")
"""The spec knobs that choose an estimator, the first that has one of its own winning
(sum_then_normalize, the default aggregation, leaves the choice to scale_rewards)."""


def register_advantage(name: str, *, knob: str, value: str) -> Callable[[Estimator], Estimator]:
    """Register the decorated estimator as `name`, chosen when the spec's `knob` is `value`."""
    if knob not in CHOOSING_KNOBS:
        raise ValueError(f"an estimator is chosen by one of {CHOOSING_KNOBS}, not {knob!r}")

    def register(estimator: Estimator) -> Estimator:
        if name in ESTIMATORS or (knob, value) in CHOSEN_BY:
            raise ValueError(f"advantage estimator {name!r} ({knob}={value!r}) registered twice")
        ESTIMATORS[name], CHOSEN_BY[(knob, value)] = estimator, name
        return estimator

    return register


def advantage_estimator(name: str) -> Estimator:
    """The estimator registered as `name`; ValueError naming the known ones otherwise."""
    if name not in ESTIMATORS:
        known = ", ".join(sorted(ESTIMATORS))
        raise ValueError(f"unknown advantage estimator {name!r}; known: {known}")
    return ESTIMATORS[name]


def estimator_name(knobs: AdvantageKnobs) -> str:
    """The estimator the spec's knobs choose: multi_objective_aggregation's own (GDPO's
    normalize_then_sum), else, under sum_then_normalize, scale_rewards'."""
    chosen = CHOSEN_BY.get(("multi_objective_aggregation", knobs.aggregation))
    if chosen is not None:
        return chosen
    if knobs.aggregation != "sum_then_normalize":
        raise ValueError(f"unknown multi_objective_aggregation {knobs.aggregation!r}")
    chosen = CHOSEN_BY.get(("scale_rewards", knobs.scale))
    if chosen is None:
        scales = " or ".join(repr(v) for k, v in CHOSEN_BY if k == "scale_rewards")
        raise ValueError(f"scale must be {scales}, got {knobs.scale!r}")
    return chosen


def step_advantages(
    scored: ScoredRewards, knobs: AdvantageKnobs, batch_std: BatchStd | None = None
) -> Tensor:
    """The step's advantages (B, G) as the spec's knobs say: the estimator they choose,
    then the clip. The one call site of the estimators: what training computes for a round
    and again over a step's kept groups (grpo/rollout/rounds.py), and a replay for stored
    groups (grpo/eval/replay.py)."""
    estimator = advantage_estimator(estimator_name(knobs))
    advantages = estimator(scored, eps=knobs.eps, batch_std=batch_std or population_std)
    return clip_advantages(advantages, knobs.clip)


def group_advantages(
    rewards: Tensor,
    *,
    scale: str = "group",
    eps: float = 1e-8,
    batch_std: BatchStd | None = None,
) -> Tensor:
    """rewards (B, G) -> advantages (B, G) by the estimator `scale` (scale_rewards) chooses
    under sum_then_normalize, unclipped: step_advantages of the totals alone."""
    knobs = AdvantageKnobs(scale=scale, eps=eps)
    return step_advantages(ScoredRewards(rewards), knobs, batch_std)


@register_advantage("grpo", knob="scale_rewards", value="group")
def grpo_advantages(scored: ScoredRewards, *, eps: float, batch_std: BatchStd) -> Tensor:
    """A = (r - mean_g) / (std_g + eps): each group's rewards centred on their own mean
    (the baseline a critic would have learned) over their population std (DeepSeekMath,
    Shao et al. 2024, arXiv:2402.03300). TRL: scale_rewards="group" (or True)."""
    rewards = scored.rewards
    _check_rewards(rewards)
    std = rewards.std(dim=1, correction=0, keepdim=True)  # (B, 1)
    # eps keeps all-equal groups at exactly 0, not NaN
    return _centred(rewards) / (std + eps)


@register_advantage("grpo_batch_std", knob="scale_rewards", value="batch")
def batch_std_advantages(scored: ScoredRewards, *, eps: float, batch_std: BatchStd) -> Tensor:
    """A = (r - mean_g) / (std_batch + eps): group means, one population std over all
    B x G rewards ("group mean, batch std", Liu et al. 2025, "Tricks or Traps? A Deep Dive
    into RL for LLM Reasoning", arXiv:2508.08221). TRL: scale_rewards="batch"."""
    rewards = scored.rewards
    _check_rewards(rewards)
    std = batch_std(rewards.flatten())  # ()
    return _centred(rewards) / (std + eps)


@register_advantage("dr_grpo", knob="scale_rewards", value="none")
def dr_grpo_advantages(scored: ScoredRewards, *, eps: float, batch_std: BatchStd) -> Tensor:
    """A = r - mean_g: no std, which favours no difficulty level (Dr. GRPO, Liu et al. 2025,
    "Understanding R1-Zero-Like Training", arXiv:2503.20783). TRL: scale_rewards="none" (or
    False)."""
    rewards = scored.rewards
    _check_rewards(rewards)
    return _centred(rewards)


@register_advantage("gdpo", knob="multi_objective_aggregation", value="normalize_then_sum")
def gdpo_advantages(scored: ScoredRewards, *, eps: float, batch_std: BatchStd) -> Tensor:
    """Each reward function normalised within its group before the weighted sum
    (decoupled_advantages of the per-function scores; GDPO, Liu et al. 2026,
    arXiv:2601.05242). TRL: multi_objective_aggregation="normalize_then_sum"."""
    table = reward_table(scored.scores, num_groups=scored.rewards.shape[0])  # (B, G, K)
    k_weights = torch.tensor([scored.weights[label] for label in scored.scores])  # (K,)
    return decoupled_advantages(table, k_weights, eps=eps, batch_std=batch_std)


def _centred(rewards: Tensor) -> Tensor:
    """r - mean_g (B, G), exactly 0 in all-equal groups."""
    return _zero_tiny(rewards - rewards.mean(dim=1, keepdim=True), rewards)


def _check_rewards(rewards: Tensor) -> None:
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be 2-D (B, G), got shape {tuple(rewards.shape)}")
    if rewards.shape[1] < 2:
        raise ValueError(f"each group needs G >= 2 completions, got G = {rewards.shape[1]}")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards contain NaN or infinite values")


def _zero_tiny(centred: Tensor, rewards: Tensor) -> Tensor:
    """Round-off of the mean (e.g. 0.1 * 3 / 3) would give all-equal groups +-1e-17 / eps."""
    is_flat = (rewards == rewards[:, :1]).all(dim=1, keepdim=True)  # (B, 1)
    return torch.where(is_flat, torch.zeros_like(centred), centred)


def clip_advantages(advantages: Tensor, limit: float | None) -> Tensor:
    """|A| <= limit when a limit is set (bounds the step a single outlier reward can cause)."""
    return advantages if limit is None else advantages.clamp(-limit, limit)


def decoupled_advantages(
    scores: Tensor, weights: Tensor, *, eps: float = 1e-8, batch_std: BatchStd | None = None
) -> Tensor:
    """scores (B, G, K) of K reward functions, NaN = not applicable; weights (K,) -> (B, G).

    normalize_then_sum (GDPO, Liu et al. 2026, arXiv:2601.05242; TRL's
    multi_objective_aggregation): each function is a z-score within its group,
        z_k = (r_k - mean_g r_k) / (std_g r_k + eps)   (population std, NaN entries left out),
    the weighted sum s = sum_k w_k z_k (a NaN z counts 0) is then divided by the population
    std of s over the batch's scorable completions. Every group's s sums to 0, so the batch
    mean TRL subtracts is 0 here. A completion no function applies to gets 0, and so does
    every completion of a group where each function is flat (no signal, as for one reward).
    """
    if scores.dim() != 3 or scores.shape[1] < 2:
        raise ValueError(f"scores must be (B, G >= 2, K), got shape {tuple(scores.shape)}")
    if torch.isinf(scores).any():
        raise ValueError("rewards contain infinite values")
    is_scored = ~torch.isnan(scores)  # (B, G, K)
    count = is_scored.sum(dim=1, keepdim=True).clamp(min=1)  # (B, 1, K)
    mean = scores.nan_to_num().sum(dim=1, keepdim=True) / count
    centred = torch.where(is_scored, scores - mean, torch.zeros_like(scores))  # (B, G, K)
    std = (centred.square().sum(dim=1, keepdim=True) / count).sqrt()
    is_flat = std == 0  # also kills the mean's round-off on all-equal groups
    z = torch.where(is_flat, torch.zeros_like(centred), centred / (std + eps))
    total = (z * weights.to(z.dtype)).sum(dim=2)  # (B, G)
    is_scorable = is_scored.any(dim=2)  # (B, G)
    scorable = total[is_scorable]
    std = (batch_std or population_std)(scorable)
    return torch.where(is_scorable, total / (std + eps), torch.zeros_like(total))


def reward_table(scores: Mapping[str, Sequence[float | None]], *, num_groups: int) -> Tensor:
    """Per-function scores of B x G completions -> (B, G, K) in the functions' order, NaN
    where a function returned None (not applicable)."""
    columns = [[math.nan if v is None else float(v) for v in column] for column in scores.values()]
    return torch.tensor(columns, dtype=torch.float64).T.reshape(num_groups, -1, len(columns))
