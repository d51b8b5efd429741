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

from grpo.loss import grpo_loss
from grpo.rollout import Rollout, completion_logps
from grpo.spec import JobSpec


@dataclass(frozen=True)
class UpdateResult:
    """Averages over the mu iterations, and the pre-update per-token statistics."""

    metrics: dict[str, float]
    """loss, grad_norm, kl (beta > 0), clip_ratio/low|high|region."""
    logps: Tensor  # (N, T) policy log-probs before the first optimizer step, detached
    entropy: Tensor  # (N, T) policy entropy before the first optimizer step


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
    share_prompt = not spec.gradient_checkpointing
    old_logps = None
    if spec.num_iterations > 1:
        with torch.no_grad(), autocast():
            old_logps, _ = completion_logps(
                model, rollout, temperature=spec.temperature, share_prompt=share_prompt
            )
    history: list[dict[str, float]] = []
    first: tuple[Tensor, Tensor] | None = None
    for _ in range(spec.num_iterations):
        with autocast():
            logps, entropy = completion_logps(
                model,
                rollout,
                temperature=spec.temperature,
                share_prompt=share_prompt,
                with_entropy=first is None,
            )
        loss, metrics = grpo_loss(
            logps,
            logps.detach() if old_logps is None else old_logps,
            ref_logps,
            advantages,
            loss_mask,
            epsilon=spec.epsilon,
            epsilon_high=spec.epsilon_high,
            beta=beta,
            loss_type=spec.loss_type,
            max_completion_length=spec.max_completion_length,
        )
        _check_finite(loss, step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        metrics["grad_norm"] = _clip_gradients(model, spec.max_grad_norm)
        optimizer.step()
        metrics["loss"] = float(loss.detach())
        history.append(metrics)
        if first is None and entropy is not None:
            first = (logps.detach(), entropy)
    assert first is not None
    return UpdateResult(_mean_metrics(history), *first)


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
