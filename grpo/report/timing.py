"""Wall-clock time of each phase of a step, reported as `time/<phase>` seconds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

REPORTED_PHASES = ("generate", "reward", "reference", "train")
"""The phases every step reports as `time/<phase>` (0 when a step skips one)."""


class StepClock:
    """Accumulates seconds per named phase since the step started."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def scalars(self, *, num_tokens: int) -> dict[str, float]:
        """time/<phase>, time/step and completion tokens per second of the whole step."""
        total = time.perf_counter() - self.started
        scalars = {f"time/{name}": self.seconds.get(name, 0.0) for name in REPORTED_PHASES}
        scalars["time/step"] = total
        scalars["tokens_per_second"] = num_tokens / total if total > 0 else 0.0
        return scalars
