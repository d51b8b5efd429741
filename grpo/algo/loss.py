"""The GRPO objective: clipped surrogate + k3 KL penalty, aggregated by `loss_type`.

Per token t of completion i, with rho = exp(logp - old_logp) (DeepSeekMath eq. 3):
    l_it = -min(rho * A_i, clip(rho, 1 - epsilon, 1 + epsilon_high) * A_i) + beta * KL_it
    KL_it = exp(ref - logp) - (ref - logp) - 1   (Schulman's k3: unbiased and >= 0)
A `loss_type` is an objective and an aggregation (grpo/spec/algorithm.py's LOSS_TYPES, as
verl splits them); OBJECTIVES and AGGREGATIONS below hold one entry per name. Other
variants, each a function below: a sequence-level rho (GSPO), rho capped at delta
(two-sided clipping), the high-entropy token mask and the entropy bonus. Pure tensor math
on per-token log-probabilities; knows nothing of models or tokenizers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch
from torch import Tensor

from grpo.report.metrics import masked_mean
from grpo.spec.algorithm import LOSS_TYPES, LossRecipe

if TYPE_CHECKING:
    from grpo.spec import JobSpec

ImportanceLevel = Literal["token", "sequence"]


def k3_kl(logps: Tensor, ref_logps: Tensor) -> Tensor:
    """Per-token KL(pi || ref) estimate exp(ref - logp) - (ref - logp) - 1 (Schulman, 2020)."""
    delta = ref_logps - logps
    return torch.exp(delta) - delta - 1


@dataclass(frozen=True)
class LossKnobs:
    """The spec's loss knobs, whole (AlgorithmKnobs' names, TRL's), and this step's beta
    (the adaptive controller moves it, grpo/algo/kl_control.py)."""

    epsilon: float = 0.2
    epsilon_high: float | None = None
    beta: float = 0.04
    loss_type: str = "grpo"
    max_completion_length: int | None = None
    importance_sampling_level: ImportanceLevel | str = "token"
    delta: float | None = None
    entropy_coef: float = 0.0

    @classmethod
    def of(cls, spec: JobSpec, *, beta: float) -> LossKnobs:
        return cls(
            epsilon=spec.epsilon,
            epsilon_high=spec.epsilon_high,
            beta=beta,
            loss_type=spec.loss_type,
            max_completion_length=spec.max_completion_length,
            importance_sampling_level=spec.importance_sampling_level,
            delta=spec.delta,
            entropy_coef=spec.entropy_coef,
        )


@dataclass(frozen=True)
class LossExtras:
    """What a loss may be given beyond its rows' log-probs, all optional.

    entropy_mask (bool) keeps tokens in the policy term only (top_entropy_quantile); the KL
    term stays on every token, as in TRL. entropies: the policy's, for the entropy bonus.
    When the rows are one micro-batch of a step, `normalizer` is the whole step's
    `loss_normalizer` and `entropy_tokens` the step's count of tokens in the entropy bonus:
    each piece's loss is then its partial sum over the step's denominators, so the pieces'
    losses (and gradients) add up to the whole step's. None: the rows are the whole step.
    is_weights ((n, T) or (n, 1), constants): the off-policy correction
    (grpo/algo/importance_sampling.py), multiplying the policy term before the KL is added,
    as TRL.
    """

    entropy_mask: Tensor | None = None
    entropies: Tensor | None = None
    normalizer: float | None = None
    entropy_tokens: float | None = None
    is_weights: Tensor | None = None


DEFAULT_KNOBS = LossKnobs()
NO_EXTRAS = LossExtras()


def grpo_loss(
    logps: Tensor,
    old_logps: Tensor,
    ref_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    knobs: LossKnobs = DEFAULT_KNOBS,
    extras: LossExtras = NO_EXTRAS,
) -> tuple[Tensor, dict[str, float]]:
    """Scalar loss and token-mean metrics (kl, clip_ratio/low|high|region).

    logps, old_logps, ref_logps, mask, extras' entropy_mask and entropies: (n, T);
    advantages: (n,). Gradients flow to logps and entropies only.
    """
    eps_high = knobs.epsilon if knobs.epsilon_high is None else knobs.epsilon_high
    beta, loss_type = knobs.beta, knobs.loss_type
    entropy_mask, entropies = extras.entropy_mask, extras.entropies
    if beta != 0 and ref_logps is None:
        raise ValueError("ref_logps is required when beta != 0")
    mask = mask.to(logps.dtype)
    adv = advantages.detach().to(logps.dtype).unsqueeze(1)  # (N, 1)
    objective = OBJECTIVES[recipe_of(loss_type).objective]
    ratio = importance_ratio(logps, old_logps, mask, level=knobs.importance_sampling_level)
    clip = Clip(low=knobs.epsilon, high=eps_high, delta=knobs.delta)
    per_token = objective.per_token(ratio, adv, logps, clip)  # (N, T)
    if entropy_mask is not None:
        per_token = per_token * entropy_mask.to(per_token.dtype)
    if extras.is_weights is not None:
        per_token = per_token * extras.is_weights.detach().to(per_token.dtype)
    kl = k3_kl(logps, ref_logps.detach()) if ref_logps is not None and beta != 0 else None
    if kl is not None:
        per_token = per_token + beta * kl
    normalizer = extras.normalizer
    if normalizer is None:
        normalizer = loss_normalizer(
            mask, loss_type=loss_type, max_completion_length=knobs.max_completion_length
        )
    loss = aggregate(per_token, mask, loss_type=loss_type, normalizer=normalizer)
    if knobs.entropy_coef != 0:
        if entropies is None:
            raise ValueError("entropies are required when entropy_coef != 0")
        kept = mask if entropy_mask is None else mask * entropy_mask.to(mask.dtype)
        bonus = entropy_bonus(entropies, kept, extras.entropy_tokens)
        loss = loss - knobs.entropy_coef * bonus
    ratio = ratio.detach()
    metrics = _metrics(ratio, adv, mask, kl, clip)
    return loss, {**metrics, **objective.metrics(ratio, adv, mask, clip)}


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


@dataclass(frozen=True)
class Clip:
    """The clip knobs every objective is given: epsilon, epsilon_high (or epsilon), delta."""

    low: float
    high: float
    delta: float | None = None


def clipped_objective(ratio: Tensor, adv: Tensor, logps: Tensor, clip: Clip) -> Tensor:
    """-min(min(rho, delta) * A, clip(rho, 1 - low, 1 + high) * A) (PPO's clipped surrogate).

    delta (two-sided clipping, INTELLECT-2, arXiv:2505.07291) caps the unclipped term: for
    A < 0 the min picks the larger ratio, so without it one token with a huge rho gives an
    unbounded step; with delta > 1 + high the loss is flat (no gradient) above rho = delta.
    For A > 0 the clip already binds first, so delta changes nothing there.
    """
    clipped = torch.clamp(ratio, 1 - clip.low, 1 + clip.high)
    capped = ratio if clip.delta is None else torch.clamp(ratio, max=clip.delta)
    return -torch.minimum(capped * adv, clipped * adv)


def cispo_objective(ratio: Tensor, adv: Tensor, logps: Tensor, clip: Clip) -> Tensor:
    """-sg(min(rho, cap)) * A * logp (CISPO, MiniMax-M1, arXiv:2506.13585), cap = clip.high.

    The importance weight is clipped and detached instead of the update: every token keeps
    a gradient A * w * grad(logp), only its weight is bounded. `cap` is epsilon_high itself
    (1 + eps_high^IS in the paper's notation, ScaleRL's eps_max; TRL's semantics); no lower
    bound, as MiniMax-M1 sets none.
    """
    weight = torch.clamp(ratio, max=clip.high).detach()
    return -weight * adv * logps


def cispo_metrics(ratio: Tensor, adv: Tensor, mask: Tensor, clip: Clip) -> dict[str, float]:
    """clip_ratio/cispo: share of tokens whose CISPO weight is capped."""
    return {"clip_ratio/cispo": masked_mean((ratio > clip.high).to(mask.dtype), mask)}


def no_metrics(ratio: Tensor, adv: Tensor, mask: Tensor, clip: Clip) -> dict[str, float]:
    return {}


@dataclass(frozen=True)
class Objective:
    """A per-token policy objective (N, T) from the ratio, and the shares of tokens it
    reports beyond every objective's clip_ratio/low|high|region, kl and clip_ratio/delta."""

    per_token: Callable[[Tensor, Tensor, Tensor, Clip], Tensor]
    metrics: Callable[[Tensor, Tensor, Tensor, Clip], dict[str, float]]


OBJECTIVES: dict[str, Objective] = {
    "clipped": Objective(clipped_objective, no_metrics),
    "cispo": Objective(cispo_objective, cispo_metrics),
}
"""The objective of each name LOSS_TYPES uses."""


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


def loss_normalizer(mask: Tensor, *, loss_type: str, max_completion_length: int | None) -> float:
    """The denominator of `loss_type`'s average over a whole step's (N, T) loss mask.

    grpo: N sequences (each already a mean over its own tokens, DeepSeekMath).
    bnpo, dapo, cispo: the step's unmasked token count (DAPO's token-level mean).
    dr_grpo: N * max_completion_length (Dr. GRPO: a constant, so no length bias).
    """
    length = mask.shape[1] if max_completion_length is None else max_completion_length
    return normalizer_from_counts(
        float(mask.shape[0]), float(mask.sum()), loss_type=loss_type, length=length
    )


def normalizer_from_counts(rows: float, tokens: float, *, loss_type: str, length: int) -> float:
    """loss_normalizer from the step's row and unmasked-token counts (summed over ranks
    when the step is split across processes); `length` is dr_grpo's constant."""
    return AGGREGATIONS[recipe_of(loss_type).aggregation].normalizer(rows, tokens, length)


def aggregate(per_token: Tensor, mask: Tensor, *, loss_type: str, normalizer: float) -> Tensor:
    """Sum (n, T) per-token losses the way `loss_type` does, over the step's `normalizer`.

    grpo sums per-sequence means; the others sum tokens. Summation splits over rows, so
    micro-batches given the whole step's normalizer add up to the step's loss.
    """
    total = AGGREGATIONS[recipe_of(loss_type).aggregation].total
    return total(per_token * mask, mask) / normalizer


def sum_of_sequence_means(masked: Tensor, mask: Tensor) -> Tensor:
    # clamp: a fully masked sequence (truncated and excluded) contributes 0, not NaN
    return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)).sum()


def sum_of_tokens(masked: Tensor, mask: Tensor) -> Tensor:
    return masked.sum()


@dataclass(frozen=True)
class Aggregation:
    """How a step's per-token losses become one number: the sum `total` of the masked
    (n, T) losses, over `normalizer(rows, tokens, length)` of the whole step's counts."""

    total: Callable[[Tensor, Tensor], Tensor]
    normalizer: Callable[[float, float, int], float]


AGGREGATIONS: dict[str, Aggregation] = {
    "sequence_mean": Aggregation(sum_of_sequence_means, lambda rows, tokens, length: rows),
    "token_mean": Aggregation(sum_of_tokens, lambda rows, tokens, length: max(tokens, 1.0)),
    "constant_length": Aggregation(sum_of_tokens, lambda rows, tokens, length: rows * length),
}
"""The aggregation of each name LOSS_TYPES uses."""


def recipe_of(loss_type: str) -> LossRecipe:
    """LOSS_TYPES' entry; ValueError naming the known ones for any other name."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {', '.join(LOSS_TYPES)}, got {loss_type!r}")
    return LOSS_TYPES[loss_type]


METRIC_KEYS = (
    "clip_ratio/low",
    "clip_ratio/high",
    "clip_ratio/region",
    "kl",
    "clip_ratio/delta",
    "clip_ratio/cispo",
    "generation/is_corrected_share",
)
"""Every metric grpo_loss can return (which ones depends on beta, delta and loss_type)."""


def _metrics(
    ratio: Tensor, adv: Tensor, mask: Tensor, kl: Tensor | None, clip: Clip
) -> dict[str, float]:
    """Fractions of unmasked tokens where the clip is active (and where delta caps rho,
    A < 0), and the token-mean KL."""
    is_low = (ratio < 1 - clip.low) & (adv < 0)  # (N, T)
    is_high = (ratio > 1 + clip.high) & (adv > 0)  # (N, T)
    metrics = {
        "clip_ratio/low": masked_mean(is_low.to(mask.dtype), mask),
        "clip_ratio/high": masked_mean(is_high.to(mask.dtype), mask),
        "clip_ratio/region": masked_mean((is_low | is_high).to(mask.dtype), mask),
    }
    if kl is not None:
        metrics["kl"] = masked_mean(kl.detach(), mask)
    if clip.delta is not None:
        is_capped = (ratio > clip.delta) & (adv < 0)
        metrics["clip_ratio/delta"] = masked_mean(is_capped.to(mask.dtype), mask)
    return metrics
