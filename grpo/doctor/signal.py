"""Signal rules: steps whose groups give GRPO nothing to learn from.

A group's advantages are its rewards relative to each other; a group whose G rewards are
all equal has advantage 0 everywhere and adds no policy gradient (DeepSeekMath's formula;
DAPO, Yu et al. 2025, arXiv:2503.14476, §3.2 calls it the gradient-decreasing problem
and filters such groups out: `dynamic_sampling`). Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

import math

from grpo.doctor.finding import ExampleQuery, Severity, Suggestion, Verdict
from grpo.doctor.rule import Detector, Metrics, Rule
from grpo.doctor.windows import Baseline, Window, percent
from grpo.spec import JobSpec

SIGNAL_WINDOW = 5
"""Steps averaged before the share of flat groups counts: one unlucky step is not a trend."""
NO_SIGNAL_INFO = 0.5
"""Mean share of all-equal-reward groups (TRL's `frac_reward_zero_std`) at which the rule
notes it: half of each step's groups train on nothing. Ours, not a paper's: the healthy
demo (examples/arith-demo.yaml) stays under 0.45 over any 5 steps; DAPO reports the share
of all-correct prompts climbing through training as its reason to over-sample."""
NO_SIGNAL_SHARE = 0.8
"""... and warns: the step trains on a fifth of its groups or less (the demo's data at
G = 2 sits near 0.65)."""
NO_SIGNAL_CRITICAL = 0.95
"""At this share the steps are nearly empty of gradient: critical."""
EASY_SHARE = 2 / 3
"""Share of the flat groups that must be all-pass (or all-fail) to call the data too easy
(or too hard) rather than mixed."""
NUM_GENERATIONS_SUGGESTED = 8
"""G suggested at least (TRL's and our default); doubling helps above it. With G
completions of a prompt answered right with probability p, the group is flat with
probability p^G + (1 - p)^G: for p = 0.9, 0.81 at G = 2 and 0.43 at G = 8."""
MAX_NUM_GENERATIONS = 64


class NoSignal:
    """Most groups of recent steps had all-equal rewards."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.share = Window(SIGNAL_WINDOW)
        self.first_reward = Baseline(1)
        self.reward = Window(SIGNAL_WINDOW)
        self.all_pass = Window(SIGNAL_WINDOW)
        self.all_fail = Window(SIGNAL_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        share = metrics.get("frac_reward_zero_std")
        if share is None:
            return None
        self.share.push(share)
        self.first_reward.push(metrics.get("reward", math.nan))
        self.reward.push(metrics.get("reward", math.nan))
        self.all_pass.push(metrics.get("groups/all_pass", 0.0))
        self.all_fail.push(metrics.get("groups/all_fail", 0.0))
        mean = self.share.mean
        if not self.share.is_full or mean < NO_SIGNAL_INFO:
            return None
        severity = Severity.INFO
        if mean >= NO_SIGNAL_SHARE:
            severity = Severity.CRITICAL if mean >= NO_SIGNAL_CRITICAL else Severity.WARNING
        flat = self.all_pass.total + self.all_fail.total
        pass_share = self.all_pass.total / flat if flat else 0.0
        if pass_share <= 1 - EASY_SHARE and self.reward.mean < self.first_reward.mean / 2:
            pass_share = math.nan  # the untrained policy (step 1) did better: it got worse
        return Verdict(
            severity=severity,
            message=(
                f"{percent(mean)} of groups had all-equal rewards over the last "
                f"{SIGNAL_WINDOW} steps, so they gave no gradient; {self._difficulty(pass_share)}"
            ),
            metric="frac_reward_zero_std",
            facts={"frac_reward_zero_std": round(mean, 4), "all_pass_share": round(pass_share, 4)},
            suggestions=self._suggestions(pass_share),
            examples=ExampleQuery("zero_std", step),
        )

    def _difficulty(self, pass_share: float) -> str:
        if math.isnan(pass_share):
            return (
                "most were all wrong, and the reward is under half the first step's: the "
                "policy got worse, the data did not get harder (see the other findings)."
            )
        if pass_share >= EASY_SHARE:
            return f"{percent(pass_share)} of them were all correct: the prompts are too easy."
        if pass_share <= 1 - EASY_SHARE:
            return f"{percent(1 - pass_share)} of them were all wrong: the prompts are too hard."
        return "they were correct and wrong alike."

    def _suggestions(self, pass_share: float) -> tuple[Suggestion, ...]:
        if math.isnan(pass_share):
            return ()  # the cause is elsewhere; more samples of a broken policy do not help
        spec, changes = self.spec, []
        g = spec.num_generations
        if g < MAX_NUM_GENERATIONS:
            more = min(MAX_NUM_GENERATIONS, max(NUM_GENERATIONS_SUGGESTED, 2 * g))
            why = "more completions per prompt make an all-equal group less likely"
            changes.append(Suggestion("num_generations", more, why))
        if not spec.dynamic_sampling.enabled:
            why = "drop the flat groups and sample more prompts until the step has signal (DAPO)"
            changes.append(Suggestion("dynamic_sampling.enabled", True, why))
        elif spec.dynamic_sampling.max_rounds < 8:
            rounds = 2 * spec.dynamic_sampling.max_rounds
            why = "the sampling rounds run out before the step is filled with signal"
            changes.append(Suggestion("dynamic_sampling.max_rounds", rounds, why))
        if pass_share >= EASY_SHARE:
            changes.append(Suggestion("data.source", None, "use harder prompts"))
        elif pass_share <= 1 - EASY_SHARE:
            why = "use easier prompts, or a model that solves some of them already"
            changes.append(Suggestion("data.source", None, why))
        return tuple(changes)


REWARD_STD_FLOOR = 0.01
"""Batch reward std under which `scale_rewards: batch` divides by almost nothing: reward
differences of rounding size become advantages of size 1 (Dr. GRPO, Liu et al. 2025,
arXiv:2503.20783, §3.1 on what the std division does; "Tricks or Traps", Liu et al. 2025,
arXiv:2508.08221, recommends the batch std for its robustness only when rewards spread)."""


class RewardScale:
    """With scale_rewards batch, the whole batch's reward std is near zero but not zero."""

    def __init__(self, spec: JobSpec) -> None:
        self.std = Window(SIGNAL_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        std = metrics.get("reward_std")
        if std is None or not math.isfinite(std):
            return None
        self.std.push(std)
        mean = self.std.mean
        if not self.std.is_full or not 0 < mean < REWARD_STD_FLOOR:
            return None
        return Verdict(
            severity=Severity.WARNING,
            message=(
                f"The batch's reward std averaged {mean:.2g} over the last {SIGNAL_WINDOW} "
                "steps and scale_rewards batch divides by it: tiny reward differences become "
                "full-size advantages."
            ),
            metric="reward_std",
            facts={"reward_std": mean},
            suggestions=(
                Suggestion(
                    "scale_rewards",
                    "none",
                    "keep advantages as large as the rewards differ (Dr. GRPO)",
                ),
            ),  # fmt: skip
        )


def _reward_scale(spec: JobSpec) -> Detector | None:
    return RewardScale(spec) if spec.scale_rewards == "batch" else None


NO_SIGNAL = Rule("no_signal", "signal", "No learning signal", NoSignal)
REWARD_SCALE = Rule("reward_scale", "signal", "Reward scale near zero", _reward_scale)
