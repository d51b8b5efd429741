"""How stale a step's groups are, which of them may train, and the async/* scalars.

A policy version counts optimizer updates: the weights after k updates are version k, so
1-based step s trains at version s - 1. A group sampled by version v and trained at
version t is t - v versions stale (TRL AsyncGRPOConfig's max_staleness, in "weight update
steps"); a group staler than max_staleness is never trained. The producer may sample step
s once its weights are at least version s - 1 - max_staleness (`may_sample`), so with
max_staleness 0 every group is sampled by the weights it trains: the synchronous steps.
Pure functions; knows nothing of threads, engines or the loss.
"""

from __future__ import annotations

import torch
from torch import Tensor


def trained_version(step: int) -> int:
    """The policy version 1-based `step` trains at: the updates before it."""
    return step - 1


def may_sample(step: int, sampler_version: int, max_staleness: int) -> bool:
    """Whether weights of `sampler_version` may sample `step`'s groups: they will be at
    most max_staleness versions stale when the step trains on them."""
    return trained_version(step) - sampler_version <= max_staleness


def group_staleness(step: int, policy_version: Tensor, num_generations: int) -> Tensor:
    """(B,) each group's staleness at `step`: its oldest completion's lag, from the (N,)
    versions that sampled the completions (row i in group i // G)."""
    oldest = policy_version.view(-1, num_generations).min(dim=1).values  # (B,)
    return trained_version(step) - oldest


def fresh_groups(staleness: Tensor, max_staleness: int) -> list[int]:
    """The groups, in order, at most max_staleness versions stale: those the step trains."""
    return [int(b) for b in (staleness <= max_staleness).nonzero().flatten().tolist()]


def staleness_scalars(staleness: Tensor, *, dropped: int) -> dict[str, float]:
    """async/staleness_mean and _max over the groups trained (their lag in versions), and
    async/dropped_stale, the groups left out for being staler than max_staleness."""
    lag = staleness.float()
    return {
        "async/staleness_mean": float(lag.mean()) if lag.numel() else 0.0,
        "async/staleness_max": float(lag.max()) if lag.numel() else 0.0,
        "async/dropped_stale": float(dropped),
    }


def busy_fraction(busy_seconds: float, wall_seconds: float) -> float:
    """The share of a stretch of wall time a side spent working, in [0, 1]."""
    if wall_seconds <= 0:
        return 0.0
    return min(1.0, max(0.0, busy_seconds / wall_seconds))


def stamped_versions(num_completions: int, version: int, device: torch.device) -> Tensor:
    """(N,) the version of the weights that sampled a whole rollout."""
    return torch.full((num_completions,), version, dtype=torch.long, device=device)
