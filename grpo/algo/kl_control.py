"""Adaptive KL coefficient: move beta so the measured KL tracks a target.

Proportional controller of Ziegler et al. (2019), "Fine-Tuning Language Models from Human
Preferences", eq. 2, applied once per GRPO step. Pure arithmetic.
"""

from __future__ import annotations


def adapt_beta(beta: float, kl: float, *, target: float | None, horizon: int) -> float:
    """beta * (1 + clip(kl / target - 1, -0.2, 0.2) / horizon); unchanged when target is None."""
    if target is None:
        return beta
    error = min(max(kl / target - 1.0, -0.2), 0.2)
    return beta * (1.0 + error / horizon)
