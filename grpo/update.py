"""The policy update of one GRPO step: mu optimizer steps on one generation batch.

mu = 1 takes the detached current log-probs as the old ones (ratio 1, no extra forward
pass, the gradient is the same); mu > 1 first records the sampling policy's real
log-probs so later iterations clip against it. Knows nothing of rewards or reporting.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from grpo.loss import grpo_loss, high_entropy_mask
from grpo.rollout import Rollout, completion_logps, completion_logps_entropy, group_rows
from grpo.spec import JobSpec


@dataclass(frozen=True)
class UpdateResult:
    """Averages over the mu iterations, and the pre-update log-probs."""

    metrics: dict[str, float]
    """loss, grad_norm, kl (beta > 0), clip_ratio/low|high|region."""
    logps: Tensor  # (N, T) policy log-probs before the first optimizer step, detached


def policy_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    advantages: Tensor,
    ref_logps: Tensor | None,
    loss_mask: Tensor,
    *,
    spec: JobSpec,
    beta: float,
    autocast: Callable[[], AbstractContextManager[Any]],
    step: int,
) -> UpdateResult:
    """Minimise the GRPO loss for spec.num_iterations optimizer steps on this batch."""
    # flat groups add exactly 0 only without a KL term and without an entropy bonus
    is_skippable = beta == 0 and spec.entropy_coef == 0
    groups = groups_with_signal(advantages, rollout.num_generations) if is_skippable else None
    if groups is not None and len(groups) == 0:
        return _zero_gradient_step(model, optimizer, rollout, spec.num_iterations)
    batch = rollout if groups is None else rollout.select_groups(groups)
    entropy_mask = step_entropy_mask(rollout, loss_mask, spec.top_entropy_quantile)

    def current_logps() -> tuple[Tensor, Tensor | None]:
        with autocast():
            if spec.entropy_coef == 0:
                logps = completion_logps(
                    model,
                    batch,
                    temperature=spec.temperature,
                    share_prompt=not spec.gradient_checkpointing,
                )
                return _spread(logps, groups, rollout), None
            logps, entropies = completion_logps_entropy(
                model,
                batch,
                temperature=spec.temperature,
                share_prompt=not spec.gradient_checkpointing,
            )
        return _spread(logps, groups, rollout), _spread(entropies, groups, rollout)

    old_logps = None
    if spec.num_iterations > 1:
        with torch.no_grad():
            old_logps = current_logps()[0]
    history: list[dict[str, float]] = []
    first: Tensor | None = None
    for _ in range(spec.num_iterations):
        logps, entropies = current_logps()
        old = logps.detach() if old_logps is None else old_logps
        loss, metrics = grpo_loss(
            logps,
            old,
            ref_logps,
            advantages,
            loss_mask,
            epsilon=spec.epsilon,
            epsilon_high=spec.epsilon_high,
            beta=beta,
            loss_type=spec.loss_type,
            max_completion_length=spec.max_completion_length,
            importance_sampling_level=spec.importance_sampling_level,
            delta=spec.delta,
            entropy_mask=entropy_mask,
            entropies=entropies,
            entropy_coef=spec.entropy_coef,
        )
        history.append({**metrics, **_optimizer_step(model, optimizer, loss, spec=spec, step=step)})
        first = logps.detach() if first is None else first
    assert first is not None
    return UpdateResult({**_mean_metrics(history), **_mask_share(entropy_mask, loss_mask)}, first)


def step_entropy_mask(rollout: Rollout, loss_mask: Tensor, quantile: float) -> Tensor | None:
    """The top_entropy_quantile mask over the whole step, from the sampling distribution's
    entropies (the policy's own at mu = 1): one threshold however the step is cut."""
    if quantile >= 1:
        return None
    return high_entropy_mask(rollout.entropy, loss_mask, quantile=quantile)


def _mask_share(entropy_mask: Tensor | None, loss_mask: Tensor) -> dict[str, float]:
    """entropy_masked_share: fraction of the loss's tokens the entropy mask leaves out."""
    if entropy_mask is None:
        return {}
    tokens = loss_mask.bool()
    kept = int((entropy_mask & tokens).sum())
    return {"entropy_masked_share": 1 - kept / max(int(tokens.sum()), 1)}


def _optimizer_step(
    model: Any, optimizer: torch.optim.Optimizer, loss: Tensor, *, spec: JobSpec, step: int
) -> dict[str, float]:
    """Backward, clip, step; the loss and the pre-clip gradient norm."""
    _check_finite(loss, step)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    grad_norm = _clip_gradients(model, spec.max_grad_norm)
    optimizer.step()
    return {"loss": float(loss.detach()), "grad_norm": grad_norm}


def groups_with_signal(advantages: Tensor, num_generations: int) -> Tensor:
    """Indices of groups with a nonzero advantage. Without a KL term the others (all-equal
    rewards) add exactly 0 to loss and gradient, so their forward and backward are skipped."""
    return advantages.view(-1, num_generations).ne(0).any(dim=1).nonzero().squeeze(1)


def _spread(logps: Tensor, groups: Tensor | None, rollout: Rollout) -> Tensor:
    """Per-token values of the selected groups' rows placed in a zero (N, T) tensor: skipped
    rows then have ratio 1 and advantage 0, and the loss normalisation stays that of N rows."""
    if groups is None:
        return logps
    rows = group_rows(groups, rollout.num_generations)
    return logps.new_zeros(rollout.completion_ids.shape).index_copy(0, rows, logps)


def _zero_gradient_step(
    model: Any, optimizer: torch.optim.Optimizer, rollout: Rollout, iterations: int
) -> UpdateResult:
    """No group has signal: take the optimizer steps a zero gradient would (momentum and
    weight decay still act), without any forward pass."""
    for _ in range(iterations):
        for p in model.parameters():
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
        optimizer.step()
    metrics = {"clip_ratio/low": 0.0, "clip_ratio/high": 0.0, "clip_ratio/region": 0.0}
    logps = torch.zeros(rollout.completion_ids.shape, device=rollout.completion_ids.device)
    return UpdateResult({**metrics, "grad_norm": 0.0, "loss": 0.0}, logps)


def _check_finite(loss: Tensor, step: int) -> None:
    if not bool(torch.isfinite(loss)):
        value = "NaN" if bool(torch.isnan(loss)) else "infinite"
        raise FloatingPointError(
            f"loss is {value} at step {step}; lower learning_rate, check the rewards, or use "
            "precision fp32"
        )


def _clip_gradients(model: Any, max_norm: float | None) -> float:
    """Global gradient norm before clipping (inf max_norm measures without clipping)."""
    params = [p for p in model.parameters() if p.grad is not None]
    limit = float("inf") if max_norm is None else max_norm
    return float(torch.nn.utils.clip_grad_norm_(params, limit))


def _mean_metrics(history: list[dict[str, float]]) -> dict[str, float]:
    return {key: sum(m[key] for m in history) / len(history) for key in history[0]}
