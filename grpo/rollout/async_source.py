"""The asynchronous source of scored groups (async_generation; shared/DESIGN.md, round 4).

A producer thread samples and scores the steps' groups in step order, each with the
sampler's weights of the moment, and queues them; it samples step s only once those
weights are at least version s - 1 - max_staleness (grpo/rollout/staleness.py `may_sample`), so
it runs at most max_staleness + 1 steps ahead. The trainer takes each step's batch from
the queue; a group staler than max_staleness is dropped (reported as a dropped group and
counted), never trained. After every weight_sync_steps-th update the trainer hands the
sampler its weights, holding the sampling lock, so no batch mixes two versions.

What a step samples depends only on (seed, step), as in the synchronous source: prompts
and seeds are the step's, so a resume regenerates the steps whose batches were queued and
no prompt is skipped or repeated. The sampler is the vLLM server (HTTP, the trainer's own
engine) or, for the native engine, grpo/engines/producer.py's own copy of the weights.
Knows nothing of the loss.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from torch import Tensor

from grpo.engines.engine import Engine
from grpo.report.timing import StepClock
from grpo.rollout.dynamic_sampling import Filled
from grpo.rollout.group_source import Pulled, is_sync_due, stamp
from grpo.rollout.rounds import Rounds
from grpo.rollout.staleness import (
    busy_fraction,
    fresh_groups,
    group_staleness,
    may_sample,
    staleness_scalars,
)
from grpo.spec import JobSpec


@dataclass(frozen=True)
class Produced:
    """One step's batch as the producer queued it."""

    step: int
    version: int
    """The version of the weights that sampled it."""
    filled: Filled
    truncated_prompts: int
    logged_metrics: dict[str, float]
    seconds: dict[str, float]
    """The producer's clock: generate, reward and time/reward/<label> seconds."""


def split_stale(filled: Filled, step: int, *, max_staleness: int) -> tuple[Filled, Tensor, int]:
    """The batch less its groups staler than max_staleness at `step` (moved to its dropped
    groups, which the report shows), the (B',) staleness of the groups kept, and how many
    were dropped."""
    kept = filled.kept
    versions = kept.rollout.policy_version
    assert versions is not None  # stamped when sampled
    lag = group_staleness(step, versions, kept.rollout.num_generations)  # (B,)
    fresh = fresh_groups(lag, max_staleness)
    if len(fresh) == len(kept.examples):
        return filled, lag, 0
    stale = sorted(set(range(len(kept.examples))) - set(fresh))
    kept, dropped = kept.select(fresh), kept.select(stale)
    return replace(filled, kept=kept, dropped=dropped), lag[fresh], len(stale)


class AsyncSource:
    """A producer thread sampling ahead of the trainer, and its queue."""

    def __init__(self, rounds: Rounds, engine: Engine, spec: JobSpec) -> None:
        self.rounds, self.engine, self.spec = rounds, engine, spec
        self.sampling = threading.Lock()
        """Held while a batch is sampled or the sampler takes new weights."""
        self.changed = threading.Condition()
        """Guards what follows; notified when a batch is queued or the version moves."""
        self.version = 0
        """The version of the sampler's weights."""
        self.ready: deque[Produced | BaseException] = deque()
        self.busy_s = 0.0
        """Seconds the producer sampled since the trainer last took a batch."""
        self.is_stopped = False
        self.thread: threading.Thread | None = None
        self.taken_at = time.perf_counter()

    def start(self, step: int, model: Any) -> None:
        if step > 0:  # resumed: the sampler started from the weights before the checkpoint's
            self.engine.load_weights(model)
        self.version, self.taken_at = step, time.perf_counter()
        self.thread = threading.Thread(
            target=self._produce, args=(step + 1,), name="grpo-producer", daemon=True
        )
        self.thread.start()

    def take(self, step: int, clock: StepClock) -> Pulled:
        """The step's batch: waits for the producer, drops groups staler than
        max_staleness, and merges the producer's phase seconds into the step's clock."""
        with clock.phase("wait"), self.changed:
            self.changed.wait_for(lambda: bool(self.ready))
            item = self.ready.popleft()
            depth, busy_s, self.busy_s = len(self.ready), self.busy_s, 0.0
        if isinstance(item, BaseException):
            raise item  # the producer's failure (a reward function's, the server's), as in sync
        if item.step != step:
            raise RuntimeError(f"the producer queued step {item.step} where {step} was due")
        for name, seconds in item.seconds.items():
            clock.seconds[name] = clock.seconds.get(name, 0.0) + seconds
        filled, lag, dropped = split_stale(item.filled, step, max_staleness=self.spec.max_staleness)
        now = time.perf_counter()
        wall, self.taken_at = now - self.taken_at, now
        scalars = {
            **staleness_scalars(lag, dropped=dropped),
            "async/queue_depth": float(depth),
            "async/generator_busy": busy_fraction(busy_s, wall),
            "async/trainer_busy": busy_fraction(wall - clock.seconds.get("wait", 0.0), wall),
        }
        return Pulled(filled, {}, item.truncated_prompts, item.logged_metrics, scalars)

    def after_update(self, step: int, model: Any) -> None:
        if not is_sync_due(step, self.spec):
            return
        with self.sampling:  # waits for a batch being sampled: it keeps its one version
            self.engine.load_weights(model)
            with self.changed:
                self.version = step
                self.changed.notify_all()

    def close(self) -> None:
        """Stop the producer after the batch it is sampling, and wait for it."""
        with self.changed:
            self.is_stopped = True
            self.changed.notify_all()
        if self.thread is not None:
            self.thread.join()

    def _produce(self, first: int) -> None:
        """The producer thread: each step's batch, in order, once the weights may sample it."""
        try:
            for step in range(first, self.spec.max_steps + 1):
                if not self._wait_until_due(step):
                    return
                item = self._sample(step)
                with self.changed:
                    self.ready.append(item)
                    self.changed.notify_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the trainer, raised there
            with self.changed:
                self.ready.append(exc)
                self.changed.notify_all()

    def _wait_until_due(self, step: int) -> bool:
        """Wait until the sampler's weights may sample `step`; False: the source stopped."""
        with self.changed:
            self.changed.wait_for(
                lambda: self.is_stopped or may_sample(step, self.version, self.spec.max_staleness)
            )
            return not self.is_stopped

    def _sample(self, step: int) -> Produced:
        with self.sampling:
            started, version, clock = time.perf_counter(), self.version, StepClock()
            filled, _ = self.rounds.sample(step, clock)
            rounds = self.rounds
            item = Produced(
                step, version, stamp(filled, version), rounds.truncated_prompts,
                dict(rounds.logged_metrics), dict(clock.seconds),
            )  # fmt: skip
        with self.changed:
            self.busy_s += time.perf_counter() - started
        return item
