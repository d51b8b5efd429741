"""Rolling statistics a detector keeps per run: O(1) work per step, bounded memory.

Knows nothing of metrics' names or of findings.
"""

from __future__ import annotations

import math
from collections import deque


class Window:
    """The last `size` values and their sum: a rolling mean for O(1) a step."""

    def __init__(self, size: int) -> None:
        self.values: deque[float] = deque(maxlen=size)
        self.total = 0.0

    def push(self, value: float) -> None:
        if len(self.values) == self.values.maxlen:
            self.total -= self.values[0]
        self.values.append(value)
        self.total += value

    @property
    def is_full(self) -> bool:
        return len(self.values) == self.values.maxlen

    @property
    def mean(self) -> float:
        return self.total / len(self.values) if self.values else math.nan

    @property
    def first(self) -> float:
        return self.values[0] if self.values else math.nan


class Trend:
    """A metric's mean over the last `size` steps against its mean over the `size` before:
    how far it moved, in O(1) a step."""

    def __init__(self, size: int) -> None:
        self.recent = Window(size)
        self.earlier = Window(size)

    def push(self, value: float) -> None:
        if self.recent.is_full:
            self.earlier.push(self.recent.first)
        self.recent.push(value)

    @property
    def is_full(self) -> bool:
        return self.earlier.is_full

    @property
    def change(self) -> float:
        """Recent mean minus earlier mean (nan until both windows are full)."""
        return self.recent.mean - self.earlier.mean if self.is_full else math.nan


class Baseline:
    """The mean of a metric's first `size` finite values: where the run started."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.count = 0
        self.total = 0.0

    def push(self, value: float) -> None:
        if self.count < self.size and math.isfinite(value):
            self.count += 1
            self.total += value

    @property
    def is_set(self) -> bool:
        return self.count == self.size

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan


class Streak:
    """Consecutive steps a condition has held (0 once it fails)."""

    def __init__(self) -> None:
        self.length = 0

    def push(self, holds: bool) -> int:
        self.length = self.length + 1 if holds else 0
        return self.length


def percent(share: float) -> str:
    """0.923 -> `92%`."""
    return f"{100 * share:.0f}%"
