"""Which completions pass, and a group's outcome: the one definition the trainer's metrics,
the stored groups and the dashboard all show.

A completion passes when the spec's accuracy-like reward (its first `accuracy`,
`exact_match` or `code` entry) gives it full marks, a score of 1 (a `code` reward: every
test passes); a spec without one passes a completion whose weighted total reward reaches
`logging.pass_threshold`. A 0.2 format bonus on a wrong answer is therefore a fail, not a
pass. A group is `all_pass` when its G completions all pass, `all_fail` when none does,
else `mixed`. Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # report.py imports this module and stays plain dataclasses
    from grpo.spec.rewards import RewardEntry

ACCURACY_LIKE = ("accuracy", "exact_match", "code")
"""Reward kinds whose full score means "the answer is right"."""


class GroupOutcome(StrEnum):
    """A group by its completions' passes. The store, the API and the dashboard use these
    names; metrics.group_scalars counts the same three per step (groups/<outcome>)."""

    ALL_FAIL = "all_fail"
    ALL_PASS = "all_pass"
    MIXED = "mixed"


def pass_label(rewards: Sequence[RewardEntry]) -> str | None:
    """Label of the reward that decides a pass, or None when the total reward decides."""
    return next((r.label for r in rewards if r.name in ACCURACY_LIKE), None)


def completion_passes(
    scores: Mapping[str, Sequence[float | None]],
    totals: Sequence[float],
    *,
    label: str | None,
    threshold: float,
) -> list[bool]:
    """Pass or fail of each completion (group-major, B x G), by the rule above."""
    if label is None:
        return [total >= threshold for total in totals]
    return [score is not None and score >= 1.0 for score in scores[label]]


def group_outcome(passes: Sequence[bool]) -> GroupOutcome:
    """all_pass, all_fail or mixed from the passes of one group's completions."""
    if all(passes):
        return GroupOutcome.ALL_PASS
    return GroupOutcome.MIXED if any(passes) else GroupOutcome.ALL_FAIL
