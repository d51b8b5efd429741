"""What a rule is: an id, a family, a title and a detector it starts for a run.

A detector is the rule's incremental state for one run: `observe` sees each step's
metrics once, in step order, does O(1) work, and answers a Verdict while the rule's
condition holds at that step (None while it does not). Fed the same steps it answers the
same verdicts: the findings of a run are a pure function of its stored metric series, so
the worker (live) and the API (for runs stored before, grpo/doctor/doctor.py `diagnose`)
agree. Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from grpo.doctor.finding import Verdict
from grpo.spec import JobSpec

Metrics = Mapping[str, float]


class Detector(Protocol):
    def observe(self, step: int, metrics: Metrics) -> Verdict | None: ...


@dataclass(frozen=True)
class Rule:
    """One diagnosis; `start` returns None when it cannot apply to the spec (e.g. the reward
    scale rule without `scale_rewards: batch`)."""

    id: str
    family: str
    """The module that holds it: signal, exploration, stability, length, reward, resources,
    asynchrony."""
    title: str
    """A few words for the card's heading, e.g. `No learning signal`."""
    start: Callable[[JobSpec], Detector | None]
