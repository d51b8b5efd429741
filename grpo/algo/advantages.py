"""Group-relative advantages: the critic-free baseline that gives GRPO its name.

Each prompt's G rewards are centred on their own mean (the baseline a critic would have
learned) and scaled by a standard deviation. Pure tensor math; knows nothing of models.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import torch
from torch import Tensor

Scale = Literal["group", "batch", "none"]


def population_std(values: Tensor) -> Tensor:
    """Population std of a flat tensor (0 when empty)."""
    return values.std(correction=0) if values.numel() else values.new_zeros(())


BatchStd = Callable[[Tensor], Tensor]


def group_advantages(
    rewards: Tensor,
    *,
    scale: Scale | str = "group",
    eps: float = 1e-8,
    batch_std: BatchStd | None = None,
) -> Tensor:
    """rewards (B, G) -> advantages (B, G).

    group: A = (r - mean_g) / (std_g + eps)   (DeepSeekMath, population std over the group)
    batch: A = (r - mean_g) / (std_batch + eps)   (one population std over all B x G)
    none:  A = r - mean_g   (Dr. GRPO: no std, which favours no difficulty level)
    `batch_std` computes std_batch of the flat rewards: over every rank's when the step's
    groups are split across processes (distributed.Ranks.population_std).
    """
    _check_rewards(rewards)
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # (B, G)
    match scale:
        case "group":
            std = rewards.std(dim=1, correction=0, keepdim=True)  # (B, 1)
        case "batch":
            std = (batch_std or population_std)(rewards.flatten())  # ()
        case "none":
            return _zero_tiny(centred, rewards)
        case _:
            raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    # population std as in DeepSeekMath; eps keeps all-equal groups at exactly 0, not NaN
    return _zero_tiny(centred, rewards) / (std + eps)


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


def step_advantages(
    rewards: Tensor,
    scores: Mapping[str, Sequence[float | None]],
    weights: Mapping[str, float],
    *,
    scale: Scale | str,
    aggregation: str,
    eps: float,
    clip: float | None,
    batch_std: BatchStd | None = None,
) -> Tensor:
    """rewards (B, G) and their per-function `scores` -> the step's advantages (B, G), as
    the spec's knobs say: `aggregation` sum_then_normalize (group_advantages of the weighted
    totals) or normalize_then_sum (decoupled_advantages of the scores), then the clip. What
    training computes for a round (grpo/rollout/rounds.py) and a replay for stored groups
    (grpo/eval/replay.py)."""
    match aggregation:
        case "sum_then_normalize":
            advantages = group_advantages(rewards, scale=scale, eps=eps, batch_std=batch_std)
        case "normalize_then_sum":
            table = reward_table(scores, num_groups=rewards.shape[0])  # (B, G, K)
            k_weights = torch.tensor([weights[label] for label in scores])  # (K,)
            advantages = decoupled_advantages(table, k_weights, eps=eps, batch_std=batch_std)
        case _:
            raise ValueError(f"unknown multi_objective_aggregation {aggregation!r}")
    return clip_advantages(advantages, clip)


def reward_table(scores: Mapping[str, Sequence[float | None]], *, num_groups: int) -> Tensor:
    """Per-function scores of B x G completions -> (B, G, K) in the functions' order, NaN
    where a function returned None (not applicable)."""
    columns = [[math.nan if v is None else float(v) for v in column] for column in scores.values()]
    return torch.tensor(columns, dtype=torch.float64).T.reshape(num_groups, -1, len(columns))
