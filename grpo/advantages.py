"""Group-relative advantages: the critic-free baseline that gives GRPO its name.

Each prompt's G rewards are centred on their own mean (the baseline a critic would have
learned) and scaled by a standard deviation. Pure tensor math; knows nothing of models.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

Scale = Literal["group", "batch", "none"]


def group_advantages(rewards: Tensor, *, scale: Scale | str = "group", eps: float = 1e-8) -> Tensor:
    """rewards (B, G) -> advantages (B, G).

    group: A = (r - mean_g) / (std_g + eps)   (DeepSeekMath, population std over the group)
    batch: A = (r - mean_g) / (std_batch + eps)   (one population std over all B x G)
    none:  A = r - mean_g   (Dr. GRPO: no std, which favours no difficulty level)
    """
    _check_rewards(rewards)
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # (B, G)
    match scale:
        case "group":
            std = rewards.std(dim=1, correction=0, keepdim=True)  # (B, 1)
        case "batch":
            std = rewards.std(correction=0)  # ()
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
