"""Length rules: completions cut at the limit, or a mean length that runs away either way.

A completion cut at max_completion_length is scored on a text that never finished, so its
reward says little about the answer (DAPO, Yu et al. 2025, arXiv:2503.14476, §3.4:
"reward noise" from truncated samples; its overlong filtering is our
mask_truncated_completions). GRPO's per-sequence mean also biases length: long wrong
answers are penalised less per token and short right ones rewarded more (Dr. GRPO, Liu et
al. 2025, arXiv:2503.20783, §3.1). Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

from grpo.doctor.finding import ExampleQuery, Severity, Suggestion, Verdict
from grpo.doctor.rule import Metrics, Rule
from grpo.doctor.windows import Baseline, Window, percent
from grpo.spec import JobSpec

LENGTH_WINDOW = 5
TRUNCATION_SHARE = 0.2
"""Mean share of completions ending at the limit (TRL's `completions/clipped_ratio`) at
which the rule fires: one in five rewards is read off an unfinished text."""
TRUNCATION_CRITICAL = 0.5
"""Half or more cut short: most rewards are noise."""
MAX_COMPLETION_LENGTH = 131072
"""The spec's bound on max_completion_length."""
BASELINE_STEPS = 5
DRIFT_WINDOW = 10
LENGTH_GROWTH = 3.0
"""Mean length at this multiple of the start's: explosion (R1-Zero-style growth is
gradual; tripling within a run of this length is the length bias at work)."""
LENGTH_SHRINK = 1 / 3
"""Mean length at this share of the start's: collapse toward empty answers."""


class Truncation:
    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.share = Window(LENGTH_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        share = metrics.get("completions/clipped_ratio")
        if share is None:
            return None
        self.share.push(share)
        mean = self.share.mean
        if not self.share.is_full or mean < TRUNCATION_SHARE:
            return None
        limit = self.spec.max_completion_length
        changes = []
        if limit < MAX_COMPLETION_LENGTH:
            why = "give completions room to finish"
            changes.append(
                Suggestion("max_completion_length", min(MAX_COMPLETION_LENGTH, 2 * limit), why)
            )
        if not self.spec.mask_truncated_completions:
            why = "leave cut completions out of the loss (DAPO overlong filtering)"
            changes.append(Suggestion("mask_truncated_completions", True, why))
        return Verdict(
            severity=Severity.CRITICAL if mean >= TRUNCATION_CRITICAL else Severity.WARNING,
            message=(
                f"{percent(mean)} of completions hit max_completion_length ({limit} tokens) "
                f"over the last {LENGTH_WINDOW} steps: their rewards are read off unfinished text."
            ),
            metric="completions/clipped_ratio",
            facts={"completions/clipped_ratio": mean, "max_completion_length": float(limit)},
            suggestions=tuple(changes),
            examples=ExampleQuery("truncated", step),
        )


class LengthDrift:
    """The mean completion length tripled, or fell to a third, since the start."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.start = Baseline(BASELINE_STEPS)
        self.length = Window(DRIFT_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        length = metrics.get("completions/mean_length")
        if length is None:
            return None
        self.start.push(length)
        self.length.push(length)
        if not self.start.is_set or not self.length.is_full or self.start.mean <= 0:
            return None
        ratio = self.length.mean / self.start.mean
        if LENGTH_SHRINK < ratio < LENGTH_GROWTH:
            return None
        way = "grew" if ratio >= LENGTH_GROWTH else "shrank"
        changes = []
        if self.spec.loss_type == "grpo":
            why = "average tokens over the batch, not per sequence, so length is not favoured"
            changes.append(Suggestion("loss_type", "dr_grpo", why))
        return Verdict(
            severity=Severity.WARNING,
            message=(
                f"The mean completion length {way} {ratio:.1f}x, from {self.start.mean:.3g} "
                f"to {self.length.mean:.3g} tokens: the loss may be rewarding length itself."
            ),
            metric="completions/mean_length",
            facts={"mean_length": self.length.mean, "mean_length_start": self.start.mean},
            suggestions=tuple(changes),
        )


TRUNCATION = Rule("truncation", "length", "Completions truncated", Truncation)
LENGTH_DRIFT = Rule("length_drift", "length", "Length explosion or collapse", LengthDrift)
