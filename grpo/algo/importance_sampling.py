"""Correcting the gap between the sampler's log-probs and the trainer's.

The sampler's probability of a sampled token, pi_s, is not the trainer's pi_old when
another engine sampled (vLLM's kernels differ, even at the same weights) or older weights
did (an asynchronous run's producer, up to max_staleness versions behind): the rollout is
off-policy. Truncated importance sampling (Yao et al. 2025, "Your efficient RL framework
secretly brings you off-policy RL training") weights each token's policy loss by a bounded
ratio w = pi_old / pi_s, as TRL's GRPOTrainer does (its vllm_importance_sampling_* knobs),
in four modes:

    token_truncate     w_t = clamp(exp(old_t - s_t), C_min, C_max)
    token_mask         w_t = exp(old_t - s_t), 0 where outside [C_min, C_max]
    sequence_truncate  w_i = clamp(exp(sum_t m_t (old_t - s_t)), C_min, C_max), all t
    sequence_mask      w_i = exp(sum_t m_t (old_t - s_t)), 0 when outside, all t

A missing bound is no bound. The weights are constants (no gradient) that multiply the
per-token policy loss before the KL term is added (grpo/algo/loss.py). Pure tensor math.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def importance_weights(
    old_logps: Tensor,
    sampling_logps: Tensor,
    mask: Tensor,
    *,
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
) -> Tensor:
    """The correction's weights: (N, T) for token modes, (N, 1) for sequence modes.

    old_logps: the trainer's log-probs of the sampled tokens before the update; sampling_logps:
    the engine's; mask (N, T): the tokens that count (a sequence's ratio sums over them).
    """
    if mode not in MODES:
        raise ValueError(f"vllm_importance_sampling_mode must be one of {MODES}, got {mode!r}")
    log_ratio = (old_logps.detach() - sampling_logps) * mask  # (N, T)
    if mode.startswith("sequence"):
        log_ratio = log_ratio.sum(dim=1, keepdim=True)  # (N, 1)
    ratio = torch.exp(log_ratio.float())
    if mode.endswith("truncate"):
        return ratio if clip_min is None and clip_max is None else ratio.clamp(clip_min, clip_max)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


def corrected_share(
    old_logps: Tensor,
    sampling_logps: Tensor,
    mask: Tensor,
    weights: Tensor,
) -> Tensor:
    """(N, T) 1 on the counted tokens whose weight the bound changed (truncated or masked):
    the weight differs from the raw ratio exp(old - sampled) of its token or sequence."""
    log_ratio = (old_logps.detach() - sampling_logps) * mask
    if weights.shape[1] == 1:
        log_ratio = log_ratio.sum(dim=1, keepdim=True)
    raw = torch.exp(log_ratio.float())
    changed = ~torch.isclose(weights, raw, rtol=1e-6, atol=0.0)
    return changed.expand_as(mask).to(mask.dtype) * mask


def logprob_gap(old_logps: Tensor, sampling_logps: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """|old - sampled| summed over the counted tokens, and its max (0 with no token): the
    generation/logprob_diff_mean numerator and generation/logprob_diff_max."""
    gap = (old_logps.detach().float() - sampling_logps.float()).abs() * mask
    total = gap.sum()
    return total, gap.max() if gap.numel() else total
