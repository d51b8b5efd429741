"""The GRPO objective: clipped surrogate + k3 KL penalty, aggregated by `loss_type`.

Per token t of completion i, with rho = exp(logp - old_logp) (DeepSeekMath eq. 3):
    l_it = -min(rho * A_i, clip(rho, 1 - epsilon, 1 + epsilon_high) * A_i) + beta * KL_it
    KL_it = exp(ref - logp) - (ref - logp) - 1   (Schulman's k3: unbiased and >= 0)
Variants, each a function below: a sequence-level rho (GSPO), rho capped at delta
(two-sided clipping), the CISPO weight, the high-entropy token mask and the entropy bonus.
Pure tensor math on per-token log-probabilities; knows nothing of models or tokenizers.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from grpo.report.metrics import masked_mean

LossType = Literal["grpo", "bnpo", "dr_grpo", "dapo", "cispo"]
ImportanceLevel = Literal["token", "sequence"]


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
    importance_sampling_level: ImportanceLevel | str = "token",
    delta: float | None = None,
    entropy_mask: Tensor | None = None,
    entropies: Tensor | None = None,
    entropy_coef: float = 0.0,
    normalizer: float | None = None,
    entropy_tokens: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Scalar loss and token-mean metrics (kl, clip_ratio/low|high|region).

    logps, old_logps, ref_logps, mask, entropy_mask, entropies: (n, T); advantages: (n,).
    entropy_mask (bool) keeps tokens in the policy term only (top_entropy_quantile); the KL
    term stays on every token, as in TRL. Gradients flow to logps and entropies only.
    When the n rows are one micro-batch of a step, `normalizer` is the whole step's
    `loss_normalizer` and `entropy_tokens` the step's count of tokens in the entropy bonus:
    each piece's loss is then its partial sum over the step's denominators, so the pieces'
    losses (and gradients) add up to the whole step's. None: the rows are the whole step.
    """
    eps_high = epsilon if epsilon_high is None else epsilon_high
    if beta != 0 and ref_logps is None:
        raise ValueError("ref_logps is required when beta != 0")
    mask = mask.to(logps.dtype)
    adv = advantages.detach().to(logps.dtype).unsqueeze(1)  # (N, 1)
    ratio = importance_ratio(logps, old_logps, mask, level=importance_sampling_level)
    if loss_type == "cispo":
        per_token = cispo_objective(ratio, adv, logps, cap=eps_high)  # (N, T)
    else:
        per_token = clipped_objective(ratio, adv, low=epsilon, high=eps_high, delta=delta)
    if entropy_mask is not None:
        per_token = per_token * entropy_mask.to(per_token.dtype)
    kl = k3_kl(logps, ref_logps.detach()) if ref_logps is not None and beta != 0 else None
    if kl is not None:
        per_token = per_token + beta * kl
    if normalizer is None:
        normalizer = loss_normalizer(
            mask, loss_type=loss_type, max_completion_length=max_completion_length
        )
    loss = aggregate(per_token, mask, loss_type=loss_type, normalizer=normalizer)
    if entropy_coef != 0:
        if entropies is None:
            raise ValueError("entropies are required when entropy_coef != 0")
        kept = mask if entropy_mask is None else mask * entropy_mask.to(mask.dtype)
        loss = loss - entropy_coef * entropy_bonus(entropies, kept, entropy_tokens)
    ratio = ratio.detach()
    metrics = _metrics(ratio, adv, mask, kl, epsilon=epsilon, epsilon_high=eps_high)
    return loss, {**metrics, **_variant_metrics(ratio, adv, mask, loss_type, delta, eps_high)}


def importance_ratio(
    logps: Tensor, old_logps: Tensor, mask: Tensor, *, level: ImportanceLevel | str
) -> Tensor:
    """token: rho_t = exp(logp_t - old_t), (N, T).

    sequence (GSPO, Zheng et al. 2025, arXiv:2507.18071): one ratio per sequence,
    s_i = exp(sum_t m_t (logp_t - old_t) / sum_t m_t), (N, 1); its gradient reaches every
    unmasked token of the sequence, masked tokens neither count nor receive gradient.
    """
    log_ratio = logps - old_logps.detach()  # (N, T)
    match level:
        case "token":
            return torch.exp(log_ratio)
        case "sequence":
            count = mask.sum(dim=1, keepdim=True).clamp(min=1)  # (N, 1)
            return torch.exp((log_ratio * mask).sum(dim=1, keepdim=True) / count)  # (N, 1)
        case _:
            raise ValueError(f"importance_sampling_level must be token or sequence, got {level!r}")


def clipped_objective(
    ratio: Tensor, adv: Tensor, *, low: float, high: float, delta: float | None = None
) -> Tensor:
    """-min(min(rho, delta) * A, clip(rho, 1 - low, 1 + high) * A) (PPO's clipped surrogate).

    delta (two-sided clipping, INTELLECT-2, arXiv:2505.07291) caps the unclipped term: for
    A < 0 the min picks the larger ratio, so without it one token with a huge rho gives an
    unbounded step; with delta > 1 + high the loss is flat (no gradient) above rho = delta.
    For A > 0 the clip already binds first, so delta changes nothing there.
    """
    clipped = torch.clamp(ratio, 1 - low, 1 + high)
    capped = ratio if delta is None else torch.clamp(ratio, max=delta)
    return -torch.minimum(capped * adv, clipped * adv)


def cispo_objective(ratio: Tensor, adv: Tensor, logps: Tensor, *, cap: float) -> Tensor:
    """-sg(min(rho, cap)) * A * logp (CISPO, MiniMax-M1, arXiv:2506.13585).

    The importance weight is clipped and detached instead of the update: every token keeps
    a gradient A * w * grad(logp), only its weight is bounded. `cap` is epsilon_high itself
    (1 + eps_high^IS in the paper's notation, ScaleRL's eps_max; TRL's semantics); no lower
    bound, as MiniMax-M1 sets none.
    """
    weight = torch.clamp(ratio, max=cap).detach()
    return -weight * adv * logps


def high_entropy_mask(
    entropies: Tensor, mask: Tensor, *, quantile: float, pooled: Tensor | None = None
) -> Tensor:
    """Bool (N, T): unmasked tokens whose entropy is >= the (1 - quantile) quantile of all
    unmasked tokens' entropies (top_entropy_quantile = rho of "Beyond the 80/20 Rule",
    Wang et al. 2025, arXiv:2506.01939). Computed once over the whole step, so cutting the
    step into micro-batches cannot move the threshold; quantile 1 keeps every token.
    `pooled`: the unmasked entropies of the whole step when these rows are one rank's part.
    """
    is_token = mask.bool()
    values = (entropies[is_token] if pooled is None else pooled).float()
    if values.numel() == 0:
        return torch.zeros_like(is_token)
    threshold = torch.quantile(values, 1 - quantile)
    return (entropies >= threshold) & is_token


def entropy_bonus(entropies: Tensor, mask: Tensor, num_tokens: float | None = None) -> Tensor:
    """sum_t m_t H_t / num_tokens: mean entropy of the tokens in the policy term (TRL's
    entropy_coef term, subtracted from the loss times entropy_coef, whatever loss_type).
    num_tokens defaults to mask.sum(); a piece of a step passes the whole step's count."""
    count = mask.sum().clamp(min=1) if num_tokens is None else max(num_tokens, 1.0)
    return (entropies * mask).sum() / count


def loss_normalizer(
    mask: Tensor, *, loss_type: LossType | str, max_completion_length: int | None
) -> float:
    """The denominator of `loss_type`'s average over a whole step's (N, T) loss mask.

    grpo: N sequences (each already a mean over its own tokens, DeepSeekMath).
    bnpo, dapo, cispo: the step's unmasked token count (DAPO's token-level mean).
    dr_grpo: N * max_completion_length (Dr. GRPO: a constant, so no length bias).
    """
    length = mask.shape[1] if max_completion_length is None else max_completion_length
    return normalizer_from_counts(
        float(mask.shape[0]), float(mask.sum()), loss_type=loss_type, length=length
    )


def normalizer_from_counts(
    rows: float, tokens: float, *, loss_type: LossType | str, length: int
) -> float:
    """loss_normalizer from the step's row and unmasked-token counts (summed over ranks
    when the step is split across processes); `length` is dr_grpo's constant."""
    match loss_type:
        case "grpo":
            return rows
        case "bnpo" | "dapo" | "cispo":
            return max(tokens, 1.0)
        case "dr_grpo":
            return rows * length
        case _:
            raise ValueError(
                f"loss_type must be grpo, bnpo, dr_grpo, dapo or cispo, got {loss_type!r}"
            )


def aggregate(
    per_token: Tensor, mask: Tensor, *, loss_type: LossType | str, normalizer: float
) -> Tensor:
    """Sum (n, T) per-token losses the way `loss_type` does, over the step's `normalizer`.

    grpo sums per-sequence means; the others sum tokens. Summation splits over rows, so
    micro-batches given the whole step's normalizer add up to the step's loss.
    """
    masked = per_token * mask
    match loss_type:
        case "grpo":
            # clamp: a fully masked sequence (truncated and excluded) contributes 0, not NaN
            return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)).sum() / normalizer
        case "bnpo" | "dapo" | "cispo" | "dr_grpo":
            return masked.sum() / normalizer
        case _:
            raise ValueError(
                f"loss_type must be grpo, bnpo, dr_grpo, dapo or cispo, got {loss_type!r}"
            )


METRIC_KEYS = (
    "clip_ratio/low",
    "clip_ratio/high",
    "clip_ratio/region",
    "kl",
    "clip_ratio/delta",
    "clip_ratio/cispo",
)
"""Every metric grpo_loss can return (which ones depends on beta, delta and loss_type)."""


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
        "clip_ratio/low": masked_mean(is_low.to(mask.dtype), mask),
        "clip_ratio/high": masked_mean(is_high.to(mask.dtype), mask),
        "clip_ratio/region": masked_mean((is_low | is_high).to(mask.dtype), mask),
    }
    if kl is not None:
        metrics["kl"] = masked_mean(kl.detach(), mask)
    return metrics


def _variant_metrics(
    ratio: Tensor, adv: Tensor, mask: Tensor, loss_type: str, delta: float | None, cap: float
) -> dict[str, float]:
    """Share of tokens where delta caps rho (A < 0), or where the CISPO weight is capped."""
    metrics = {}
    if delta is not None:
        is_capped = (ratio > delta) & (adv < 0)
        metrics["clip_ratio/delta"] = masked_mean(is_capped.to(mask.dtype), mask)
    if loss_type == "cispo":
        metrics["clip_ratio/cispo"] = masked_mean((ratio > cap).to(mask.dtype), mask)
    return metrics
