"""grpo/report/outcome.py: a pass is the accuracy-like reward's full marks, else the threshold."""

from __future__ import annotations

import pytest
import torch

from grpo.report import GroupReport
from grpo.report.metrics import group_scalars
from grpo.report.outcome import completion_passes, group_outcome, pass_label
from grpo.spec.rewards import AccuracyReward, CodeReward, FormatReward, LengthReward


def test_a_format_bonus_on_a_wrong_answer_is_a_fail_not_a_pass() -> None:
    rewards = (AccuracyReward(), FormatReward(weight=0.2))
    scores = {"accuracy": [0.0, 1.0, 0.0, 1.0], "format": [1.0, 1.0, 0.0, 0.0]}
    totals = [0.2, 1.2, 0.0, 1.0]
    label = pass_label(rewards)
    assert label == "accuracy"
    assert completion_passes(scores, totals, label=label, threshold=1.0) == [
        False,
        True,
        False,
        True,
    ]


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([1.0, 0.5, 0.0], [True, False, False]),  # all tests pass, half, none
        ([None, 1.0, 0.99], [False, True, False]),  # not applicable is no pass
    ],
)
def test_a_code_reward_passes_only_with_every_test(scores, expected) -> None:
    label = pass_label((LengthReward(), CodeReward(label="tests")))
    assert label == "tests"
    assert completion_passes({"tests": scores}, [0, 0, 0], label=label, threshold=0) == expected


def test_without_an_accuracy_like_reward_the_total_meets_the_threshold() -> None:
    label = pass_label((FormatReward(), LengthReward()))
    assert label is None
    totals = [0.5, 0.49, 1.0, -0.2]
    assert completion_passes({}, totals, label=None, threshold=0.5) == [True, False, True, False]


@pytest.mark.parametrize(
    ("passes", "outcome"),
    [([True, True], "all_pass"), ([False, False], "all_fail"), ([True, False], "mixed")],
)
def test_group_outcome_and_the_report_and_the_metrics_agree(passes, outcome) -> None:
    group = GroupReport(0, "p", "q", "a", [0.2, 0.2], [0.0, 0.0], passes=passes)
    assert group_outcome(passes) == group.outcome == outcome
    counts = group_scalars(torch.tensor([[0.2, 0.2]]), torch.tensor([passes]))
    assert counts[f"groups/{outcome}"] == 1.0
    assert sum(counts[f"groups/{k}"] for k in ("all_pass", "all_fail", "mixed")) == 1.0
