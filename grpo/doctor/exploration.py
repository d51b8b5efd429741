"""Exploration rules: the policy stops sampling anything new while the reward stands still.

Policy entropy falls in every RL run for reasoning, and a falling entropy with a rising
reward is the run working (Cui et al. 2025, "The Entropy Mechanism of Reinforcement
Learning for Reasoning Language Models", arXiv:2505.22617: R = -a exp(H) + b). The rule
fires only when entropy has nearly gone and the reward has stopped moving: what is left of
exploration is spent. Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

from grpo.doctor.finding import Severity, Suggestion, Verdict
from grpo.doctor.rule import Metrics, Rule
from grpo.doctor.windows import Baseline, Trend, Window, percent
from grpo.spec import JobSpec

BASELINE_STEPS = 5
"""Steps whose mean entropy is where the run started."""
ENTROPY_WINDOW = 10
"""Steps averaged for the current entropy and, twice over, for the reward's trend."""
ENTROPY_COLLAPSE_FRACTION = 0.1
"""Current entropy at or under this share of the start's counts as collapsed. Cui et al.
see entropy lose 73% within the first 200 steps of healthy runs; 90% gone is past that."""
FLAT_REWARD_DELTA = 0.01
"""Reward gained from the previous window to the last one under which the reward is flat
(rewards of the built-in tasks and of accuracy-style rewards lie in [0, 1])."""
SOLVED_SHARE = 0.9
"""Share of all-pass groups at which a run with no entropy left has simply solved its data."""
ENTROPY_COEF_SUGGESTED = 0.001
"""A small entropy bonus; entropy regularisation helps LLM RL only weakly (Shen et al. 2025,
"On Entropy Control in LLM-RL Algorithms", use 2e-4 with clamping), so it comes after the
other suggestions."""
EPSILON_HIGH_SUGGESTED = 0.28
"""DAPO's clip-higher (Yu et al. 2025, arXiv:2503.14476, §3.1), introduced against entropy
collapse: low-probability tokens may grow further before the ratio is clipped."""


class EntropyCollapse:
    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.start = Baseline(BASELINE_STEPS)
        self.entropy = Window(ENTROPY_WINDOW)
        self.reward = Trend(ENTROPY_WINDOW)
        self.solved = Window(ENTROPY_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        entropy, reward = metrics.get("entropy"), metrics.get("reward")
        if entropy is None or reward is None:
            return None
        self.start.push(entropy)
        self.entropy.push(entropy)
        self.reward.push(reward)
        groups = sum(metrics.get(f"groups/{k}", 0.0) for k in ("all_pass", "all_fail", "mixed"))
        self.solved.push(metrics.get("groups/all_pass", 0.0) / groups if groups else 0.0)
        if not self.reward.is_full or not self.start.is_set or self.start.mean <= 0:
            return None
        share = self.entropy.mean / self.start.mean
        gained = self.reward.change
        if share > ENTROPY_COLLAPSE_FRACTION or gained >= FLAT_REWARD_DELTA:
            return None
        if self.solved.mean >= SOLVED_SHARE:
            return None
        return Verdict(
            severity=Severity.WARNING,
            message=(
                f"Entropy fell to {percent(share)} of where the run started "
                f"({self.entropy.mean:.3g} from {self.start.mean:.3g}) and the reward gained "
                f"{gained:+.3f} over the last {ENTROPY_WINDOW} steps: the policy has stopped "
                "exploring before it learned the task."
            ),
            metric="entropy",
            facts={
                "entropy": self.entropy.mean,
                "entropy_start": self.start.mean,
                "reward_gain": gained,
            },  # fmt: skip
            suggestions=self._suggestions(),
        )

    def _suggestions(self) -> tuple[Suggestion, ...]:
        spec, changes = self.spec, []
        if spec.temperature < 1.0:
            changes.append(Suggestion("temperature", 1.0, "sample from the policy as it is"))
        else:
            warmer = round(min(2.0, spec.temperature * 1.2), 2)
            changes.append(Suggestion("temperature", warmer, "sample more diverse completions"))
        if spec.epsilon_high is None and spec.loss_type != "cispo":
            why = "let unlikely tokens grow before clipping (DAPO clip-higher)"
            changes.append(Suggestion("epsilon_high", EPSILON_HIGH_SUGGESTED, why))
        why = "smaller steps spend the entropy more slowly"
        changes.append(Suggestion("learning_rate", _halved(spec.learning_rate), why))
        if spec.entropy_coef == 0:
            why = "reward entropy a little"
            changes.append(Suggestion("entropy_coef", ENTROPY_COEF_SUGGESTED, why))
        return tuple(changes)


def _halved(value: float) -> float:
    return float(f"{value / 2:.2g}")


ENTROPY_COLLAPSE = Rule("entropy_collapse", "exploration", "Entropy collapse", EntropyCollapse)
