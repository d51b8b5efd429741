"""Asynchrony rules: which side of an asynchronous run waits on the other, and whether the
sampler's log-probs drift away from the trainer's.

An async run (async_generation; grpo/rollout/async_source.py, docs/how-to/async.md) reports per
step `async/trainer_busy`, the share of the wall time since the previous step the trainer
did not spend waiting for the producer's batch; `async/generator_busy`, the share the
producer spent sampling and scoring; `async/queue_depth`, the batches still queued once the
trainer took its own; `async/staleness_mean`; and `async/dropped_stale`, the groups left out
for being staler than max_staleness. Every run whose sampler is not the trainer itself (an
async producer, a vLLM engine) reports `generation/logprob_diff_mean`, the mean |trainer -
sampler| log-prob per loss token (grpo/training/update.py).

With generation costing g seconds a step and training t, a perfect overlap takes max(g, t)
a step: the faster side waits for the slower, trainer_busy is t / max(g, t) and
generator_busy g / max(g, t), and async gains (g + t) / max(g, t) = 1 + the smaller busy
share over taking turns. The rules start for every spec: a run that does not report their
metrics (a synchronous one; the gap: one that samples with the policy itself) leaves them
silent. Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

import math

from grpo.doctor.finding import Severity, Suggestion, Verdict
from grpo.doctor.rule import Metrics, Rule
from grpo.doctor.windows import Baseline, Window, percent
from grpo.spec import JobSpec

ASYNC_WINDOW = 10
"""Steps a busy share or a gap is averaged over (as the resource rules)."""
STARVED_SHARE = 0.5
"""A side busy at most half the wall time over the window waits on the other more than it
works; the overlap then gains at most 1.5x over taking turns (1 + the busy share), under
issue 41's target of 1.6x. Ours, from the arithmetic above; the healthy async demo (2 shared
CPU cores, tests/data/doctor_async_demo.json) reads 1.0 (trainer) and 0.60-0.78
(producer) over any 10 steady steps."""
STARVED_WARNING = 0.2
"""Busy at most a fifth of the time: the overlap gains at most 1.2x, little for training on
stale groups."""
PACE_SHARE = 0.9
"""A trainer busy this share of the time or more sets the pace: a producer waiting at the
bound then gains nothing from a larger max_staleness, and a smaller one (down to
weight_sync_steps, where it still samples the next sync's steps during the update) trains
fresher groups at the same speed. Under it the trainer waits too (with max_staleness 0 the
two sides take turns): the bound holds both back, and a larger one buys overlap."""
GAP_FLOOR = 0.05
"""Mean log-prob gap (nats per token) under which no growth counts: a token's importance
ratio within exp(+-0.05), a quarter of PPO's epsilon 0.2. vLLM in bf16 against our bf16
trainer measured 0.0017 (docs/how-to/vllm.md); the healthy async demo (max_staleness 4,
learning rate 3e-4) reads 0.09-0.15 over any 10 steps, so there growth is the signal."""
GAP_GROWTH = 3.0
"""The last window's mean gap at this multiple of the first window's: growing. The healthy
async demo stays within 0.7-1.1x of its start; 3x as for KL and completion length."""
GAP_CRITICAL = 0.5
"""Mean gap (nats per token) at which the average token's ratio, exp(0.5) = 1.65, is far
outside PPO's [0.8, 1.2]: the importance correction truncates or masks most tokens and the
update learns from little, whatever the trend. 3x the healthy async demo's worst window."""


def is_steady(step: int, spec: JobSpec) -> bool:
    """Not the first step (the trainer waits for the first batch in every run) nor the last
    max_staleness (the producer has sampled every step and idles)."""
    return 1 < step <= spec.max_steps - spec.max_staleness


def starved_severity(busy: float) -> Severity:
    return Severity.WARNING if busy <= STARVED_WARNING else Severity.INFO


class BusyShares:
    """Both sides' busy shares and the queue depth over the window, from the steady steps
    only: what the two starvation rules read (part of a doctor's saved state)."""

    def __init__(self) -> None:
        self.trainer = Window(ASYNC_WINDOW)
        self.generator = Window(ASYNC_WINDOW)
        self.depth = Window(ASYNC_WINDOW)

    def push(self, step: int, metrics: Metrics, spec: JobSpec) -> bool:
        """Take this step's shares; True once the window is full (False before, and on a
        step that reports none or is not steady)."""
        trainer, generator = metrics.get("async/trainer_busy"), metrics.get("async/generator_busy")
        if trainer is None or generator is None or not is_steady(step, spec):
            return False
        self.trainer.push(trainer)
        self.generator.push(generator)
        self.depth.push(metrics.get("async/queue_depth", 0.0))
        return self.trainer.is_full


class TrainerStarved:
    """The trainer waits on an empty queue most of each step: generation sets the pace."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.shares = BusyShares()

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        if not self.shares.push(step, metrics, self.spec):
            return None
        busy, generator = self.shares.trainer.mean, self.shares.generator.mean
        if busy > STARVED_SHARE:
            return None
        return Verdict(
            severity=starved_severity(busy),
            message=(
                f"The trainer waited for the producer's batches {percent(1 - busy)} of the "
                f"time over the last {ASYNC_WINDOW} steps (the producer was busy "
                f"{percent(generator)}): generation sets the pace, and the overlap "
                f"gains at most {1 + busy:.2f}x over taking turns."
            ),
            metric="async/trainer_busy",
            facts={"async/trainer_busy": busy, "async/generator_busy": generator},
            suggestions=self._suggestions(),
        )

    def _suggestions(self) -> tuple[Suggestion, ...]:
        spec, changes = self.spec, []
        if not spec.use_vllm:
            why = "generate on a vLLM server, on cores or a device of its own"
            changes += [Suggestion("use_vllm", True, why), Suggestion("vllm_mode", "server", why)]
        size = spec.generation_batch_size
        if size is not None and size < spec.completions_per_step:
            why = "decode more completions at once"
            changes.append(Suggestion("generation_batch_size", 2 * size, why))
        fewer = 2 * spec.weight_sync_steps
        if spec.use_vllm and fewer - 1 <= spec.max_staleness:
            why = "fewer weight pushes, each of which pauses the server's sampling"
            changes.append(Suggestion("weight_sync_steps", fewer, why))
        return tuple(changes)


class GeneratorStarved:
    """The producer waits at max_staleness for the trainer's updates most of each step (its
    queue full), or samples groups that are then dropped for staleness."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.shares = BusyShares()
        self.dropped = Window(ASYNC_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        dropped = metrics.get("async/dropped_stale")
        if dropped is not None:
            self.dropped.push(dropped)
        is_full = self.shares.push(step, metrics, self.spec)
        if dropped is not None and dropped > 0:
            return self._dropped(step)
        if not is_full or self.shares.generator.mean > STARVED_SHARE:
            return None
        return self._idle(self.shares.generator.mean)

    def _idle(self, busy: float) -> Verdict:
        spec, trainer, depth = self.spec, self.shares.trainer.mean, self.shares.depth.mean
        ahead = (
            "with max_staleness 0 it may not sample ahead at all, so the two sides take turns"
            if spec.max_staleness == 0
            else f"it waits at max_staleness {spec.max_staleness} for the trainer's updates"
        )
        return Verdict(
            severity=starved_severity(busy),
            message=(
                f"The producer sampled only {percent(busy)} of the time over the last "
                f"{ASYNC_WINDOW} steps (the trainer was busy {percent(trainer)}, "
                f"{depth:.1f} batches queued ahead): {ahead}."
            ),
            metric="async/generator_busy",
            facts={
                "async/generator_busy": busy,
                "async/trainer_busy": trainer,
                "async/queue_depth": depth,
            },
            suggestions=self._idle_suggestions(),
        )

    def _idle_suggestions(self) -> tuple[Suggestion, ...]:
        spec, changes = self.spec, []
        sync = spec.weight_sync_steps
        if self.shares.trainer.mean < PACE_SHARE:  # both sides wait: the bound holds them back
            why = "sample further ahead, so that neither side waits for the other"
            changes.append(Suggestion("max_staleness", spec.max_staleness + 1, why))
        elif spec.max_staleness > sync:
            why = "the trainer sets the pace: one sync ahead keeps it fed, with fresher groups"
            changes.append(Suggestion("max_staleness", sync, why))
        if spec.num_iterations > 1:
            why = "each step's update passes are the trainer's work"
            changes.append(Suggestion("num_iterations", max(1, spec.num_iterations // 2), why))
        return tuple(changes)

    def _dropped(self, step: int) -> Verdict:
        spec = self.spec
        count = self.dropped.total
        more = spec.max_staleness + spec.weight_sync_steps
        return Verdict(
            severity=Severity.WARNING,
            message=(
                f"{count:.0f} groups were sampled and scored, then dropped for being more "
                f"than max_staleness {spec.max_staleness} versions old, over the last "
                f"{len(self.dropped.values)} steps (step {step}): generation spent on "
                "nothing."
            ),
            metric="async/dropped_stale",
            facts={"async/dropped_stale": count},
            suggestions=(
                Suggestion("max_staleness", more, "room for a weight sync's worth of lag"),
            ),
        )


class LogprobGap:
    """The sampler/trainer log-prob gap grows from where the run started, or is large."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.start = Baseline(ASYNC_WINDOW)
        self.gap = Window(ASYNC_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        gap = metrics.get("generation/logprob_diff_mean")
        if gap is None:
            return None
        gap = gap if math.isfinite(gap) else 1e9
        self.start.push(gap)
        self.gap.push(gap)
        if not self.start.is_set or not self.gap.is_full:
            return None
        mean, start = self.gap.mean, self.start.mean
        growth = mean / max(start, 1e-12)
        if mean >= GAP_CRITICAL:
            severity = Severity.CRITICAL
        elif mean >= GAP_FLOOR and growth >= GAP_GROWTH:
            severity = Severity.WARNING
        else:
            return None
        return Verdict(
            severity=severity,
            message=(
                f"The sampler/trainer log-prob gap averaged {mean:.3g} nats per token over the "
                f"last {ASYNC_WINDOW} steps, {growth:.1f}x its first {ASYNC_WINDOW} steps' "
                f"{start:.3g}: {_gap_cost(severity)}{self._hint()}"
            ),
            metric="generation/logprob_diff_mean",
            facts=_gap_facts(mean, start, growth, metrics.get("async/staleness_mean")),
            suggestions=self._suggestions(),
        )

    def _hint(self) -> str:
        if self.spec.async_generation or self.spec.weight_sync_steps > 1:
            return ""
        return (
            " The sampler takes the trainer's weights after every update here, so its gap "
            "should not grow: see the run's log for its weight pushes."
        )

    def _suggestions(self) -> tuple[Suggestion, ...]:
        spec, changes = self.spec, []
        if not spec.importance_correction.enabled:
            why = "weigh each token by the trainer's over the sampler's probability"
            changes.append(Suggestion("importance_correction.enabled", True, why))
        lowest = max(spec.weight_sync_steps - 1, 1)
        if spec.async_generation and spec.max_staleness > lowest:
            why = "fewer versions between the sampler's weights and the trainer's"
            changes.append(Suggestion("max_staleness", lowest, why))
        if not spec.async_generation and spec.weight_sync_steps > 1:
            why = "the sampler takes every update's weights"
            changes.append(Suggestion("weight_sync_steps", 1, why))
        if spec.async_generation or spec.weight_sync_steps > 1:
            why = "each update moves the trainer further from the sampler's weights"
            changes.append(Suggestion("learning_rate", float(f"{spec.learning_rate / 2:.2g}"), why))
        return tuple(changes)


def _gap_cost(severity: Severity) -> str:
    if severity == Severity.CRITICAL:
        return (
            "the average token's importance ratio is far outside PPO's clip range, so the "
            "correction truncates or masks most tokens and the update learns from few."
        )
    return (
        "the groups are ever more off-policy, and the importance correction keeps ever "
        "fewer tokens near weight 1."
    )


def _gap_facts(
    mean: float, start: float, growth: float, staleness: float | None
) -> dict[str, float]:
    facts = {"generation/logprob_diff_mean": mean, "logprob_gap_start": start,
             "logprob_gap_growth": growth}  # fmt: skip
    if staleness is not None:  # an async run's: how far the sampler's weights lag
        facts["async/staleness_mean"] = staleness
    return facts


TRAINER_STARVED = Rule(
    "trainer_starved", "asynchrony", "Trainer waits on generation", TrainerStarved
)
GENERATOR_STARVED = Rule(
    "generator_starved", "asynchrony", "Generation waits on the trainer", GeneratorStarved
)
LOGPROB_GAP = Rule("logprob_gap", "asynchrony", "Log-prob gap growing", LogprobGap)
