"""Reward hacking: the reward the run optimises rises while what it stands for does not.

Two readings. Against held-out evaluation (spec `eval`): the training reward rose since
the best evaluation while eval accuracy fell from it (Gao et al. 2022, "Scaling Laws for
Reward Model Overoptimization", arXiv:2210.10760: the proxy keeps rising as the gold score
turns down). Within the training rewards: a format-style reward (`format`, `regex`)
saturates while the accuracy-like reward stays flat (DeepSeek-R1's format reward pays for
tags, never for the answer). Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from grpo.doctor.finding import ExampleQuery, Severity, Suggestion, Verdict
from grpo.doctor.rule import Metrics, Rule
from grpo.doctor.windows import Baseline, Window, percent
from grpo.report.outcome import ACCURACY_LIKE, pass_label
from grpo.spec import JobSpec
from grpo.spec.rewards import RewardEntry

TRAIN_WINDOW = 10
"""Steps whose mean training reward stands for the reward at an evaluation."""
EVAL_DROP = 0.1
"""Eval accuracy this far (absolute) under its best counts as falling: twice the standard
error of a 200-example evaluation near 50% (sqrt(.25/200) = 0.035) and then some."""
EVAL_DROP_CRITICAL = 0.25
TRAIN_RISE = 0.05
"""Training reward at least this much (absolute) above where it was at the best evaluation."""
PROXY_KINDS = ("format", "regex")
"""0/1 rewards for the shape of a completion, not its answer."""
PROXY_SATURATED = 0.9
"""A proxy reward's recent mean at or over this is saturated."""
PROXY_RISE = 0.3
"""... after rising at least this much since the start."""
ACCURACY_FLAT = 0.02
"""The accuracy reward gained less than this over the same steps: flat."""


class RewardHacking:
    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.train = Window(TRAIN_WINDOW)
        self.train_start = Baseline(TRAIN_WINDOW // 2)
        self.best: tuple[float, float] | None = None  # (eval accuracy, train reward then)
        self.held: Verdict | None = None
        self.accuracy = pass_label(spec.rewards)
        self.proxies = [r.label for r in spec.rewards if r.name in PROXY_KINDS]
        self.starts = {label: Baseline(TRAIN_WINDOW // 2) for label in self._watched}
        self.recent = {label: Window(TRAIN_WINDOW) for label in self._watched}

    @property
    def _watched(self) -> list[str]:
        return [*self.proxies, *([self.accuracy] if self.accuracy else [])]

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        reward = metrics.get("reward")
        if reward is not None:
            self.train.push(reward)
            self.train_start.push(reward)
        for label in self.starts:
            value = metrics.get(f"rewards/{label}/mean")
            if value is not None:
                self.starts[label].push(value)
                self.recent[label].push(value)
        accuracy = metrics.get("eval/accuracy")
        if accuracy is not None:
            self.held = self._against_eval(step, accuracy)
        return self.held or self._proxy_saturated(step)

    def _against_eval(self, step: int, accuracy: float) -> Verdict | None:
        train_now = self.train.mean if self.train.values else math.nan
        if self.best is None or accuracy > self.best[0]:
            self.best = (accuracy, train_now)
            return None
        best, train_then = self.best
        if math.isnan(train_then):
            train_then = self.train_start.mean  # the best was before training (step 0)
        drop, rise = best - accuracy, train_now - train_then
        if drop < EVAL_DROP or not rise >= TRAIN_RISE:
            return None
        return Verdict(
            severity=Severity.CRITICAL if drop >= EVAL_DROP_CRITICAL else Severity.WARNING,
            message=(
                f"Eval accuracy fell from {percent(best)} to {percent(accuracy)} while the "
                f"training reward rose by {rise:.2f}: the reward pays for something other "
                "than the answers the evaluation checks."
            ),
            metric="eval/accuracy",
            facts={"eval/accuracy": accuracy, "eval_best": best, "reward_rise": rise},
            suggestions=self._suggestions(),
            examples=ExampleQuery("high_reward_fail", step),
        )

    def _proxy_saturated(self, step: int) -> Verdict | None:
        if self.accuracy is None:
            return None
        acc_gain = _gain(self.starts[self.accuracy], self.recent[self.accuracy])
        if math.isnan(acc_gain):
            return None
        for label in self.proxies:
            recent = self.recent[label]
            if not recent.is_full or recent.mean < PROXY_SATURATED:
                continue
            if not _gain(self.starts[label], recent) >= PROXY_RISE or acc_gain >= ACCURACY_FLAT:
                continue
            return Verdict(
                severity=Severity.WARNING,
                message=(
                    f"The {label} reward rose to {recent.mean:.2f} while the {self.accuracy} "
                    f"reward moved {acc_gain:+.3f}: the policy learned the format, not the answers."
                ),
                metric=f"rewards/{label}/mean",
                facts={f"rewards/{label}/mean": recent.mean, "accuracy_gain": acc_gain},
                suggestions=self._suggestions(),
                examples=ExampleQuery("high_reward_fail", step),
            )
        return None

    def _suggestions(self) -> tuple[Suggestion, ...]:
        rewards = self.spec.rewards
        if not any(r.name in ACCURACY_LIKE for r in rewards):
            return (Suggestion("rewards", [*_dumped(rewards), {"name": "accuracy"}],
                               "pay for correct answers too"),)  # fmt: skip
        reweighted = [
            {**entry, "weight": round(entry.get("weight", 1.0) / 4, 3)}
            if entry["name"] in PROXY_KINDS else entry
            for entry in _dumped(rewards)
        ]  # fmt: skip
        return (Suggestion("rewards", reweighted, "weigh the format reward down against accuracy"),)


def _gain(start: Baseline, recent: Window) -> float:
    return recent.mean - start.mean if start.is_set and recent.is_full else math.nan


def _dumped(rewards: Sequence[RewardEntry]) -> list[dict[str, Any]]:
    """The entries as a spec writes them: their name and what differs from the defaults (a
    label that is the name is a default)."""
    dumped = []
    for r in rewards:
        entry = {"name": r.name, **r.model_dump(mode="json", exclude_defaults=True)}
        if entry.get("label") == r.name:
            del entry["label"]
        dumped.append(entry)
    return dumped


REWARD_HACKING = Rule("reward_hacking", "reward", "Reward hacking", RewardHacking)
