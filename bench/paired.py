"""Paired step-time ratios and their bootstrap interval, for bench/vs_trl.py.

The two sides alternate step by step, so step i of ours and step i of TRL ran back to back
under (nearly) the same load from other processes. The ratio of each pair cancels most of
that load; the headline is the median of the per-step ratios, with a percentile bootstrap
95% interval of that median (resampling the pairs, seeded, so a rerun on the same numbers
prints the same interval). Pure Python: the parent process never loads torch.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence


def paired_ratios(ours: Sequence[float], theirs: Sequence[float]) -> list[float]:
    """ours[i] / theirs[i] for each step both sides timed."""
    if len(ours) != len(theirs):
        raise ValueError(f"unpaired: {len(ours)} steps of ours, {len(theirs)} of TRL's")
    return [a / b for a, b in zip(ours, theirs, strict=True) if b > 0]


def median_with_interval(
    values: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(median, low, high): the median and its percentile-bootstrap 95% interval."""
    rng = random.Random(seed)
    medians = sorted(
        statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples)
    )
    low = medians[int(0.025 * resamples)]
    high = medians[min(resamples - 1, int(0.975 * resamples))]
    return float(statistics.median(values)), low, high
