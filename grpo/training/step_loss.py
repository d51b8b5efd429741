"""The step-wide inputs of every micro-batch's loss (grpo/algo/loss.py's grpo_loss): the tokens
the loss counts, the whole step's row and token counts (summed over ranks in the
background), the top_entropy_quantile mask over the whole step (Wang et al. 2025, "Beyond
the 80/20 rule", arXiv:2506.01939), and the normaliser of `loss_type` from those counts.
However the step is cut, into micro-batches or across ranks, each piece divides by the
same whole-step numbers, so the pieces add up to the single-pass loss. `LossTerms.loss` is
one piece's share; `mask_share` the entropy_masked_share metric. Knows nothing of the
optimizer, the model or rewards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from grpo.algo.importance_sampling import corrected_share, importance_weights
from grpo.algo.loss import (
    LossExtras,
    LossKnobs,
    grpo_loss,
    high_entropy_mask,
    normalizer_from_counts,
)
from grpo.parallel.ranks import SINGLE, Ranks
from grpo.report.metrics import masked_mean
from grpo.rollout.rollout import Rollout, group_rows
from grpo.spec import JobSpec


def loss_mask_of(rollout: Rollout, spec: JobSpec) -> Tensor:
    """(N, T) tokens the loss counts: the completions' tokens the model sampled (tool results
    left out), less truncated completions when mask_truncated_completions (DAPO's overlong
    filtering)."""
    if not spec.mask_truncated_completions:
        return rollout.model_token_mask
    return rollout.model_token_mask * (~rollout.is_truncated).long()[:, None]


def start_counts(loss_mask: Tensor, ranks: Ranks = SINGLE) -> Callable[[], list[float]]:
    """The whole step's rows and loss tokens, [N, sum of loss_mask], summed over ranks in
    the background (Ranks.sum_later) until policy_update reads them."""
    return ranks.sum_later([float(loss_mask.shape[0]), float(loss_mask.sum())])


def step_entropy_mask(
    rollout: Rollout, loss_mask: Tensor, quantile: float, ranks: Ranks = SINGLE
) -> Tensor | None:
    """The top_entropy_quantile mask over the whole step, from the sampling distribution's
    entropies (the policy's own at mu = 1): one threshold however the step is cut, into
    micro-batches or across ranks (the ranks' unmasked entropies are pooled)."""
    if quantile >= 1:
        return None
    entropy = rollout.entropy
    if entropy is None:
        raise ValueError(
            "top_entropy_quantile needs the rollout's entropies (grpo/training/update.py)"
        )
    pooled = None
    if ranks.is_distributed:
        mine = entropy[loss_mask.bool()].detach().float().cpu()
        pooled = torch.cat(ranks.gather_all(mine)).to(entropy.device)
    return high_entropy_mask(entropy, loss_mask, quantile=quantile, pooled=pooled)


def mask_share(terms: LossTerms) -> dict[str, float]:
    """entropy_masked_share: fraction of the loss's tokens the entropy mask leaves out, from
    the whole step's counts the loss already has (the mask keeps loss tokens only)."""
    if terms.entropy_mask is None:
        return {}
    return {"entropy_masked_share": 1 - terms.entropy_tokens / max(terms.step_tokens, 1.0)}


@dataclass(frozen=True)
class UpdateInputs:
    """What a step gives its policy update besides the rollout: the loss's targets per row."""

    advantages: Tensor  # (N,)
    ref_logps: Tensor | None  # (N, T) the reference's log-probs; None without a KL term
    loss_mask: Tensor  # (N, T) loss_mask_of the rollout
    beta: float
    """The step's KL coefficient (it moves under an adaptive KL)."""
    counts: Callable[[], list[float]] | None = None
    """start_counts of `loss_mask`, started when the caller knew the completions (so ranks
    that finish generating at different times meet at the gradient sum, not before the
    loss); None: policy_update starts it."""


def step_loss_terms(
    rollout: Rollout,
    groups: Tensor | None,
    inputs: UpdateInputs,
    counts: Callable[[], list[float]],
    spec: JobSpec,
    ranks: Ranks,
) -> LossTerms:
    """The step-wide inputs of every micro-batch's loss; the denominators count all N rows
    of every rank (`counts`: start_counts', read here), skipped ones included, since the
    whole step's loss is what is divided."""
    loss_mask = inputs.loss_mask
    rows, tokens = counts()
    entropy_mask = step_entropy_mask(rollout, loss_mask, spec.top_entropy_quantile, ranks)
    entropy_tokens = tokens
    if entropy_mask is not None:
        kept = loss_mask * entropy_mask.to(loss_mask.dtype)
        (entropy_tokens,) = ranks.sum([float(kept.sum())])
    return LossTerms(
        inputs.advantages,
        inputs.ref_logps,
        loss_mask,
        entropy_mask,
        _global_rows(rollout, groups),
        normalizer=normalizer_from_counts(
            rows, tokens, loss_type=spec.loss_type, length=spec.max_completion_length
        ),
        entropy_tokens=entropy_tokens,
        spec=spec,
        beta=inputs.beta,
        step_tokens=tokens,
        ranks=ranks,
        sampling_logps=rollout.sampling_logps,
    )


@dataclass(frozen=True)
class LossTerms:
    """What the loss of every micro-batch needs besides its log-probs, for the whole step."""

    advantages: Tensor  # (N,)
    ref_logps: Tensor | None  # (N, T)
    loss_mask: Tensor  # (N, T)
    entropy_mask: Tensor | None  # (N, T) bool, top_entropy_quantile over the whole step
    rows: Tensor  # (N',) the step's row of each row being trained
    normalizer: float
    """The whole step's loss denominator (loss.loss_normalizer)."""
    entropy_tokens: float
    """The whole step's count of tokens in the entropy bonus."""
    spec: JobSpec
    beta: float
    step_tokens: float
    """Unmasked tokens of the whole step, every rank's (the metrics' weight)."""
    ranks: Ranks
    sampling_logps: Tensor | None = None
    """(N, T) the sampler's log-probs of the step's tokens (a vLLM engine, an asynchronous
    producer); None: the trainer's own weights sampled."""

    def loss(
        self, logps: Tensor, entropies: Tensor | None, old_logps: Tensor, piece: slice
    ) -> tuple[Tensor, dict[str, float]]:
        """This micro-batch's share of the step's loss, and its token-mean metrics."""
        rows, spec = self.rows[piece], self.spec
        weights, corrected = self._importance(old_logps, rows)
        loss, metrics = grpo_loss(
            logps,
            old_logps,
            None if self.ref_logps is None else self.ref_logps[rows],
            self.advantages[rows],
            self.loss_mask[rows],
            LossKnobs.of(spec, beta=self.beta),
            LossExtras(
                entropy_mask=None if self.entropy_mask is None else self.entropy_mask[rows],
                entropies=entropies,
                normalizer=self.normalizer,
                entropy_tokens=self.entropy_tokens,
                is_weights=weights,
            ),
        )
        return loss, {**metrics, **corrected}

    def _importance(
        self, old_logps: Tensor, rows: Tensor
    ) -> tuple[Tensor | None, dict[str, float]]:
        """The off-policy correction of these rows by the sampler's own log-probs (the
        spec's importance_correction), and the share of their loss tokens whose weight its
        bound truncated or masked."""
        correction = self.spec.importance_correction
        if self.sampling_logps is None or not correction.enabled:
            return None, {}
        sampled, mask = self.sampling_logps[rows], self.loss_mask[rows]
        weights = importance_weights(
            old_logps,
            sampled,
            mask,
            mode=correction.mode,
            clip_min=correction.clip_min,
            clip_max=correction.clip_max,
        )
        share = corrected_share(old_logps, sampled, mask, weights)
        return weights, {"generation/is_corrected_share": masked_mean(share, mask)}


def _global_rows(rollout: Rollout, groups: Tensor | None) -> Tensor:
    """The step's row index of each row trained: all N, or the rows of the groups kept."""
    if groups is None:
        return torch.arange(rollout.completion_ids.shape[0], device=rollout.completion_ids.device)
    return group_rows(groups, rollout.num_generations)
