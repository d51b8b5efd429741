"""Step metrics from one generation batch: rewards, group outcomes, lengths, token means.

Pure functions of tensors returning plain floats keyed by the metric names the store and
the dashboard use. Which completion *passes* is grpo/report/outcome.py's rule. Knows nothing of
models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor


def reward_scalars(
    rewards: Tensor, scores: Mapping[str, Sequence[float | None]]
) -> dict[str, float]:
    """Mean and population std of the total reward (B, G) and of each function's scores,
    keyed by label, over the completions the function applies to (None scores left out;
    a function that applied to none of the step's completions has no values that step)."""
    scalars = {"reward": float(rewards.mean()), "reward_std": float(rewards.std(correction=0))}
    for label, values in scores.items():
        applied = [v for v in values if v is not None]
        if not applied:
            continue
        column = torch.tensor(applied, dtype=torch.float64)
        scalars[f"rewards/{label}/mean"] = float(column.mean())
        scalars[f"rewards/{label}/std"] = float(column.std(correction=0))
    return scalars


def group_scalars(rewards: Tensor, passes: Tensor) -> dict[str, float]:
    """Group outcomes of rewards and passes (B, G; outcome.py's rule): zero-std fraction,
    all-fail/all-pass/mixed counts."""
    is_flat = (rewards == rewards[:, :1]).all(dim=1)  # (B,)
    all_pass = passes.all(dim=1)
    all_fail = (~passes).all(dim=1)
    return {
        "frac_reward_zero_std": float(is_flat.float().mean()),
        "groups/all_fail": float(all_fail.sum()),
        "groups/all_pass": float(all_pass.sum()),
        "groups/mixed": float((~all_fail & ~all_pass).sum()),
        "reward_within_group_var_share": within_group_variance_share(rewards),
    }


def within_group_variance_share(rewards: Tensor) -> float:
    """sum over groups of within-group squared deviations / total squared deviation.

    Only within-group variance carries GRPO signal; 0 when all rewards are equal.
    """
    total = ((rewards - rewards.mean()) ** 2).sum()
    if float(total) == 0.0:
        return 0.0
    within = ((rewards - rewards.mean(dim=1, keepdim=True)) ** 2).sum()
    return float(within / total)


def length_scalars(lengths: Tensor, is_truncated: Tensor) -> dict[str, float]:
    """Completion lengths in tokens (EOS included) and the fraction cut at the limit."""
    lengths = lengths.float()
    return {
        "completions/mean_length": float(lengths.mean()),
        "completions/min_length": float(lengths.min()),
        "completions/max_length": float(lengths.max()),
        "completions/clipped_ratio": float(is_truncated.float().mean()),
    }


def masked_mean(values: Tensor, mask: Tensor) -> float:
    """Mean over unmasked tokens (0 when none); a per-sequence (N, 1) value counts once per
    unmasked token of its sequence."""
    mask = mask.to(values.dtype)
    return float((values.expand_as(mask) * mask).sum() / mask.sum().clamp(min=1))
