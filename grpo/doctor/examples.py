"""The groups and completions that show a finding: picked from one step's groups, whether
the worker holds them in memory (its StepReport) or the store reads them back.

GroupView and CompletionView are the few fields a pick needs; the worker and the store each
build them from what they have. Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from grpo.doctor.finding import CompletionRef, ExampleQuery, GroupRef
from grpo.report.outcome import pass_label
from grpo.spec import JobSpec

MAX_EXAMPLES = 3
MAX_TEXT = 300
"""Characters of a completion's text a finding keeps (the group page has the rest)."""


@dataclass(frozen=True)
class CompletionView:
    text: str
    reward: float
    rewards: Mapping[str, float | None]
    is_truncated: bool


@dataclass(frozen=True)
class GroupView:
    index: int
    answer: str
    rewards: Sequence[float]
    is_dropped: bool
    completions: Sequence[CompletionView] | None
    """None where the step kept no texts for the group."""

    @property
    def is_flat(self) -> bool:
        return max(self.rewards) == min(self.rewards) if self.rewards else False

    @property
    def has_truncated(self) -> bool:
        return any(c.is_truncated for c in self.completions or ())


def pick_examples(
    query: ExampleQuery, groups: Sequence[GroupView], spec: JobSpec
) -> tuple[list[GroupRef], list[CompletionRef]]:
    """Up to MAX_EXAMPLES groups (and, for hacking, completions) of `query.step` that show it."""
    trained = [g for g in groups if not g.is_dropped]
    step = query.step
    match query.kind:
        case "zero_std":
            picked = [g for g in trained if g.is_flat][:MAX_EXAMPLES]
            return [
                _ref(step, g, f"all {len(g.rewards)} rewards {g.rewards[0]:g}") for g in picked
            ], []
        case "truncated":
            picked = [g for g in trained if g.has_truncated][:MAX_EXAMPLES]
            notes = [sum(c.is_truncated for c in g.completions or ()) for g in picked]
            return [
                _ref(step, g, f"{n} of {len(g.rewards)} cut at the limit")
                for g, n in zip(picked, notes, strict=True)
            ], []
        case "high_reward_fail":
            completions = _high_reward_fails(step, trained, pass_label(spec.rewards))
            seen = sorted({c.group for c in completions})
            return [GroupRef(step, i, "scored high, answer wrong") for i in seen], completions


def _ref(step: int, group: GroupView, note: str) -> GroupRef:
    return GroupRef(step=step, index=group.index, note=note)


def _high_reward_fails(
    step: int, groups: Sequence[GroupView], accuracy: str | None
) -> list[CompletionRef]:
    """Completions at their group's top reward that fail: the accuracy reward under 1 when the
    spec has one, else a text that is not the reference answer."""
    found = []
    for group in groups:
        completions = group.completions or ()
        if not completions:
            continue
        top = max(c.reward for c in completions)
        for c in completions:
            score = c.rewards.get(accuracy) if accuracy else None
            is_wrong = (
                (score is None or score < 1) if accuracy else c.text.strip() != group.answer.strip()
            )
            if c.reward == top and top > 0 and is_wrong:
                found.append(CompletionRef(step, group.index, c.text[:MAX_TEXT], c.reward,
                                           dict(c.rewards), group.answer))  # fmt: skip
                break  # one per group: the examples show several prompts
        if len(found) == MAX_EXAMPLES:
            break
    return found
