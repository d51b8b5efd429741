"""Stability rules: the policy moves too far, too fast, from its reference or its last self.

KL here is the k3 estimate per token to the reference (DESIGN.md); it is measured only
with beta > 0. The clip ratio is the share of tokens whose importance ratio left
[1 - epsilon, 1 + epsilon_high]; with num_iterations 1 the ratio is exactly 1 and nothing
clips. TRL's logging guide: the ratio "should float around 1.0 ... if [it] is too high
... the updates between consecutive policies are too drastic", with clipfrac and approxkl
rising with it. Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

from grpo.doctor.finding import Severity, Suggestion, Verdict
from grpo.doctor.rule import Metrics, Rule
from grpo.doctor.windows import Trend, Window, percent
from grpo.spec import JobSpec

KL_WINDOW = 5
"""Steps per window when the KL's trend is read (the last five against the five before)."""
KL_FLOOR = 0.5
"""KL (nats per token) under which neither growth nor a spike counts. KL starts at 0 and
rises by orders of magnitude in the first steps of every run; the healthy demo
(examples/arith-demo.yaml: lr 3e-4, beta 0.04) holds 0.1-0.3 for 300 steps, with one step
at 0.86, while its learning rate at 1e-2 puts KL at 3-5 from step 3."""
KL_GROWTH = 3.0
"""The last window's mean KL at this multiple of the window before: running away."""
KL_CRITICAL = 1.0
"""Mean KL (nats per token) at which the policy is far from its reference whatever the
trend: critical."""
SPIKE_HISTORY = 20
"""Steps whose median a spike is measured against."""
SPIKE_FACTOR = 10.0
"""A step at this multiple of the recent median is a spike (KL or gradient norm)."""
CLIP_RATIO_HIGH = 0.2
"""Mean share of clipped tokens over a window at which updates are too drastic: with
epsilon 0.2 a healthy PPO update clips a few percent of tokens."""


class KlRunaway:
    """KL to the reference grows fast past a floor, spikes, or is simply large."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.trend = Trend(KL_WINDOW)
        self.history: deque[float] = deque(maxlen=SPIKE_HISTORY)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        kl = metrics.get("kl")
        if kl is None:
            return None
        kl = kl if math.isfinite(kl) else 1e9
        median = statistics.median(self.history) if self.history else math.nan
        is_spike = _is_spike(kl, median, len(self.history), floor=KL_FLOOR)
        self.history.append(kl)
        self.trend.push(kl)
        recent = self.trend.recent.mean
        growth = recent / max(self.trend.earlier.mean, 1e-12) if self.trend.is_full else 0.0
        if recent >= KL_CRITICAL and self.trend.recent.is_full:
            what = f"KL to the reference averaged {recent:.3g} nats/token over {KL_WINDOW} steps"
            severity = Severity.CRITICAL
        elif recent >= KL_FLOOR and growth >= KL_GROWTH:
            what = f"KL to the reference grew {growth:.1f}x in {KL_WINDOW} steps to {recent:.3g}"
            severity = Severity.WARNING
        elif is_spike:
            what = (
                f"KL spiked to {kl:.3g} at step {step}, {kl / max(median, 1e-12):.0f}x its median"
            )
            severity = Severity.WARNING
        else:
            return None
        return Verdict(
            severity=severity,
            message=f"{what}: the policy is moving away from its reference faster than it learns.",
            metric="kl",
            facts={"kl": kl, "kl_mean": recent, "kl_growth": growth},
            suggestions=_calmer(self.spec, severity, beta=True),
        )


class ClipRatioHigh:
    """Many tokens' importance ratios are clipped: each step moves the policy too far."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.region = Window(KL_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        region = metrics.get("clip_ratio/region")
        if region is None:
            return None
        self.region.push(region)
        mean = self.region.mean
        if not self.region.is_full or mean < CLIP_RATIO_HIGH:
            return None
        return Verdict(
            severity=Severity.WARNING,
            message=(
                f"{percent(mean)} of tokens were clipped over the last {KL_WINDOW} steps: "
                "the policy moves past the trust region on every iteration."
            ),
            metric="clip_ratio/region",
            facts={"clip_ratio/region": mean},
            suggestions=_calmer(self.spec, Severity.WARNING, beta=False),
        )


GRAD_SPIKES_WARNING = 3
"""Spikes within GRAD_SPIKE_MEMORY steps that make a warning (one is worth a note)."""
GRAD_SPIKE_MEMORY = 50
GRAD_NORM_FLOOR = 1e-3
"""Gradient norms under this are all quiet (flat steps have a zero gradient)."""


class GradNormSpike:
    """The pre-clip gradient norm jumps far above its recent median: often the first sign
    of a divergence (TRL issue #2980: grad_norm spikes growing over a long GRPO run)."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.history: deque[float] = deque(maxlen=SPIKE_HISTORY)
        self.spikes: deque[int] = deque(maxlen=GRAD_SPIKES_WARNING)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        norm = metrics.get("grad_norm")
        if norm is None:
            return None
        norm = norm if math.isfinite(norm) else 1e9
        median = statistics.median(self.history) if self.history else math.nan
        if _is_spike(norm, median, len(self.history), floor=GRAD_NORM_FLOOR):
            self.spikes.append(step)
        if norm > 0:  # steps without signal have no gradient to compare with
            self.history.append(norm)
        recent = [s for s in self.spikes if step - s < GRAD_SPIKE_MEMORY]
        if not recent or (recent[-1] != step and len(recent) < GRAD_SPIKES_WARNING):
            return None
        severity = Severity.WARNING if len(recent) >= GRAD_SPIKES_WARNING else Severity.INFO
        return Verdict(
            severity=severity,
            message=(
                f"The gradient norm spiked {len(recent)} time(s) in the last "
                f"{GRAD_SPIKE_MEMORY} steps (step {recent[-1]}: {norm:.3g}, median "
                f"{median:.3g}); spikes like these often come before a divergence."
            ),
            metric="grad_norm",
            facts={"grad_norm": norm, "grad_norm_median": median, "spikes": len(recent)},
            suggestions=self._suggestions(),
        )

    def _suggestions(self) -> tuple[Suggestion, ...]:
        spec, changes = self.spec, []
        if spec.max_grad_norm is None:
            changes.append(Suggestion("max_grad_norm", 1.0, "clip the gradient's norm"))
        why = "smaller steps make the spikes smaller"
        changes.append(Suggestion("learning_rate", _scaled(spec.learning_rate, 0.5), why))
        if spec.warmup_steps == 0:
            changes.append(Suggestion("warmup_steps", 10, "let Adam's moments settle first"))
        return tuple(changes)


def _is_spike(value: float, median: float, seen: int, *, floor: float) -> bool:
    """At least `floor` and SPIKE_FACTOR times the median of the `seen` steps before (half a
    history at least)."""
    if seen < SPIKE_HISTORY // 2 or value < floor:
        return False
    return value >= SPIKE_FACTOR * max(median, floor / SPIKE_FACTOR)


def _calmer(spec: JobSpec, severity: Severity, *, beta: bool) -> tuple[Suggestion, ...]:
    """Smaller, fewer, more anchored policy steps: learning rate, beta, num_iterations."""
    factor = 0.1 if severity == Severity.CRITICAL else 0.25
    why = "the step size drives how far each update moves the policy"
    changes = [Suggestion("learning_rate", _scaled(spec.learning_rate, factor), why)]
    if beta and spec.beta > 0:
        stronger = _scaled(spec.beta, 2.0)
        changes.append(Suggestion("beta", stronger, "pull the policy back toward the reference"))
    if spec.num_iterations > 1:
        why = "fewer updates on the same samples keep the ratio near 1"
        changes.append(Suggestion("num_iterations", max(1, spec.num_iterations // 2), why))
    return tuple(changes)


def _scaled(value: float, factor: float) -> float:
    return float(f"{value * factor:.2g}")


KL_RUNAWAY = Rule("kl_runaway", "stability", "KL runaway", KlRunaway)
CLIP_RATIO = Rule("clip_ratio_high", "stability", "Clip ratio high", ClipRatioHigh)
GRAD_NORM_SPIKE = Rule("grad_norm_spike", "stability", "Gradient-norm spikes", GradNormSpike)
