"""Where the trainer takes each step's scored groups from (shared/DESIGN.md, round 4).

The synchronous source samples the step's groups when the trainer asks (our behaviour
before asynchronous GRPO); the asynchronous one (grpo/rollout/async_source.py) hands over groups a
producer sampled ahead. Both stamp every completion with the policy version that sampled
it (grpo/rollout/staleness.py counts versions in optimizer updates) and hand the engine the new
weights after every weight_sync_steps-th update. Knows nothing of the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import torch

from grpo.engines.engine import Engine
from grpo.engines.registry import kind_of
from grpo.eval.heldout import is_eval_step
from grpo.report.timing import StepClock
from grpo.rollout.dynamic_sampling import Batch, Filled
from grpo.rollout.rounds import Rounds
from grpo.rollout.staleness import staleness_scalars, stamped_versions, trained_version
from grpo.spec import JobSpec


@dataclass(frozen=True)
class Pulled:
    """A step's scored groups as the trainer takes them, and what their sampling told."""

    filled: Filled
    dynamic: dict[str, float] = field(default_factory=dict)
    """dynamic_sampling/* scalars (synchronous source only)."""
    truncated_prompts: int = 0
    """Prompts cut to max_prompt_length among the step's."""
    logged_metrics: dict[str, float] = field(default_factory=dict)
    """What reward functions logged with log_metric while scoring the step's groups."""
    scalars: dict[str, float] = field(default_factory=dict)
    """async/*: staleness, queue depth, dropped groups, busy fractions."""


class GroupSource(Protocol):
    """The rollout as a source of scored groups, one batch per step, in step order."""

    def start(self, step: int, model: Any) -> None:
        """Training starts after `step` (0, or a resumed checkpoint's): the sampler takes
        the weights of `model` when resumed."""
        ...

    def take(self, step: int, clock: StepClock) -> Pulled:
        """The groups 1-based `step` trains on."""
        ...

    def after_update(self, step: int, model: Any) -> None:
        """The update of `step` is done: sync the sampler's weights when it is due."""
        ...

    def close(self) -> None:
        """Stop sampling; the run ends."""
        ...


def is_sync_due(step: int, spec: JobSpec) -> bool:
    """Whether the weights after `step`'s update go to the engine: every weight_sync_steps
    updates, and before a held-out evaluation (which samples with the engine)."""
    return step % spec.weight_sync_steps == 0 or is_eval_step(spec, step)


def stamp(filled: Filled, version: int) -> Filled:
    """The groups, every completion stamped with the policy version that sampled them."""

    def stamped(batch: Batch) -> Batch:
        rollout = batch.rollout
        n, device = rollout.completion_ids.shape[0], rollout.completion_ids.device
        versions = stamped_versions(n, version, device)
        return replace(batch, rollout=replace(rollout, policy_version=versions))

    dropped = None if filled.dropped is None else stamped(filled.dropped)
    return replace(filled, kept=stamped(filled.kept), dropped=dropped)


class SyncSource:
    """Samples the step's groups when the trainer asks. The native engine samples with the
    policy itself (staleness 0); another engine with the weights of its last sync."""

    def __init__(self, rounds: Rounds, engine: Engine, spec: JobSpec) -> None:
        self.rounds, self.engine, self.spec = rounds, engine, spec
        self.is_own_weights = kind_of(spec).own_weights
        self.version = 0
        """The version of the engine's weights (its last sync)."""

    def start(self, step: int, model: Any) -> None:
        if step > 0:  # resumed: the engine started from the weights before the checkpoint's
            self.engine.load_weights(model)
        self.version = step

    def take(self, step: int, clock: StepClock) -> Pulled:
        filled, dynamic = self.rounds.sample(step, clock)
        version = trained_version(step) if self.is_own_weights else self.version
        filled = stamp(filled, version)
        scalars: dict[str, float] = {}
        if self.spec.weight_sync_steps > 1:  # the only way a synchronous group is stale
            lag = torch.full((len(filled.kept.examples),), trained_version(step) - version)
            scalars = staleness_scalars(lag, dropped=0)
        rounds = self.rounds
        return Pulled(filled, dynamic, rounds.truncated_prompts, rounds.logged_metrics, scalars)

    def after_update(self, step: int, model: Any) -> None:
        if is_sync_due(step, self.spec):
            self.engine.load_weights(model)
            self.version = step

    def close(self) -> None:
        """Nothing runs beside the trainer."""
