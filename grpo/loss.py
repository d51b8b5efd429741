"""The GRPO objective: clipped surrogate + k3 KL penalty, aggregated by `loss_type`.

Per token t of completion i, with rho = exp(logp - old_logp) (DeepSeekMath eq. 3):
    l_it = -min(rho * A_i, clip(rho, 1 - epsilon, 1 + epsilon_high) * A_i) + beta * KL_it
    KL_it = exp(ref - logp) - (ref - logp) - 1   (Schulman's k3: unbiased and >= 0)
Pure tensor math on per-token log-probabilities; knows nothing of models or tokenizers.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

LossType = Literal["grpo", "bnpo", "dr_grpo", "dapo"]


def k3_kl(logps: Tensor, ref_logps: Tensor) -> Tensor:
    """Per-token KL(pi || ref) estimate exp(ref - logp) - (ref - logp) - 1 (Schulman, 2020)."""
    delta = ref_logps - logps
    return torch.exp(delta) - delta - 1


def grpo_loss(
    logps: Tensor,
    old_logps: Tensor,
    ref_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    beta: float = 0.04,
    loss_type: LossType | str = "grpo",
    max_completion_length: int | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Scalar loss and token-mean metrics (kl, clip_ratio/low|high|region).

    logps, old_logps, ref_logps, mask: (N, T); advantages: (N,). Gradients flow to logps only.
    """
    eps_high = epsilon if epsilon_high is None else epsilon_high
    if beta != 0 and ref_logps is None:
        raise ValueError("ref_logps is required when beta != 0")
    mask = mask.to(logps.dtype)
    adv = advantages.detach().to(logps.dtype).unsqueeze(1)  # (N, 1)
    ratio = torch.exp(logps - old_logps.detach())  # (N, T)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + eps_high)  # (N, T)
    per_token = -torch.minimum(ratio * adv, clipped * adv)  # (N, T)
    kl = k3_kl(logps, ref_logps.detach()) if ref_logps is not None and beta != 0 else None
    if kl is not None:
        per_token = per_token + beta * kl
    loss = aggregate(
        per_token, mask, loss_type=loss_type, max_completion_length=max_completion_length
    )
    return loss, _metrics(ratio.detach(), adv, mask, kl, epsilon=epsilon, epsilon_high=eps_high)


def aggregate(
    per_token: Tensor, mask: Tensor, *, loss_type: LossType | str, max_completion_length: int | None
) -> Tensor:
    """Reduce (N, T) per-token losses to a scalar.

    grpo: mean over each sequence's tokens, then over sequences (DeepSeekMath; favours short).
    bnpo, dapo: sum over all tokens / token count (DAPO's token-level mean).
    dr_grpo: sum / (N * max_completion_length) (Dr. GRPO: a constant, so no length bias).
    """
    masked = per_token * mask
    match loss_type:
        case "grpo":
            # clamp: a fully masked sequence (truncated and excluded) contributes 0, not NaN
            per_seq = masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # (N,)
            return per_seq.mean()
        case "bnpo" | "dapo":
            return masked.sum() / mask.sum().clamp(min=1)
        case "dr_grpo":
            length = per_token.shape[1] if max_completion_length is None else max_completion_length
            return masked.sum() / (per_token.shape[0] * length)
        case _:
            raise ValueError(f"loss_type must be grpo, bnpo, dr_grpo or dapo, got {loss_type!r}")


def _metrics(
    ratio: Tensor,
    adv: Tensor,
    mask: Tensor,
    kl: Tensor | None,
    *,
    epsilon: float,
    epsilon_high: float,
) -> dict[str, float]:
    """Fractions of unmasked tokens where the clip is active, and the token-mean KL."""
    is_low = (ratio < 1 - epsilon) & (adv < 0)  # (N, T)
    is_high = (ratio > 1 + epsilon_high) & (adv > 0)  # (N, T)
    metrics = {
        "clip_ratio/low": _masked_mean(is_low.to(mask.dtype), mask),
        "clip_ratio/high": _masked_mean(is_high.to(mask.dtype), mask),
        "clip_ratio/region": _masked_mean((is_low | is_high).to(mask.dtype), mask),
    }
    if kl is not None:
        metrics["kl"] = _masked_mean(kl.detach(), mask)
    return metrics


def _masked_mean(values: Tensor, mask: Tensor) -> float:
    return float((values * mask).sum() / mask.sum().clamp(min=1))
