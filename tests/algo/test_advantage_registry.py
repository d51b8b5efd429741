"""The advantage estimators' registry (grpo/algo/advantages.py): every spec choice reaches
one registered estimator by its name, an unknown name is refused naming the known ones,
and each estimator's numbers are worked by hand."""

from __future__ import annotations

import typing

import pytest
import torch

from grpo.algo.advantages import (
    CHOSEN_BY,
    ESTIMATORS,
    AdvantageKnobs,
    ScoredRewards,
    advantage_estimator,
    estimator_name,
    population_std,
    register_advantage,
    step_advantages,
)
from grpo.spec.algorithm import AlgorithmKnobs

SPEC_NAMES = {
    ("scale_rewards", "group"): "grpo",
    ("scale_rewards", "batch"): "grpo_batch_std",
    ("scale_rewards", "none"): "dr_grpo",
    ("multi_objective_aggregation", "normalize_then_sum"): "gdpo",
}
"""Each spec knob value that chooses an estimator, and the estimator's name."""


def literal_values(knob: str) -> tuple[str, ...]:
    return typing.get_args(AlgorithmKnobs.model_fields[knob].annotation)


def test_the_registry_holds_each_estimator_under_its_spec_name():
    assert dict(CHOSEN_BY) == SPEC_NAMES
    assert set(ESTIMATORS) == set(SPEC_NAMES.values())


@pytest.mark.parametrize(("knob", "value"), list(SPEC_NAMES))
def test_each_spec_value_reaches_its_estimator(knob, value):
    spec = AlgorithmKnobs(**{knob: value})
    name = estimator_name(AdvantageKnobs.of(spec))
    assert name == SPEC_NAMES[(knob, value)]
    assert advantage_estimator(name) is ESTIMATORS[name]


def test_every_value_the_spec_allows_chooses_a_registered_estimator():
    for scale in literal_values("scale_rewards"):
        assert estimator_name(AdvantageKnobs(scale=scale)) in ESTIMATORS
    for aggregation in literal_values("multi_objective_aggregation"):
        for scale in literal_values("scale_rewards"):
            knobs = AdvantageKnobs(aggregation=aggregation, scale=scale)
            assert estimator_name(knobs) in ESTIMATORS


def test_normalize_then_sum_wins_over_scale_rewards():
    knobs = AdvantageKnobs(aggregation="normalize_then_sum", scale="none")
    assert estimator_name(knobs) == "gdpo"


def test_an_unknown_estimator_name_is_refused_naming_the_known_ones():
    with pytest.raises(
        ValueError, match=r"unknown advantage estimator 'rloo'; known: dr_grpo, gdpo"
    ):
        advantage_estimator("rloo")


def test_unknown_spec_values_are_refused_naming_the_knob():
    with pytest.raises(ValueError, match="multi_objective_aggregation 'product'"):
        estimator_name(AdvantageKnobs(aggregation="product"))
    with pytest.raises(
        ValueError, match="scale must be 'group' or 'batch' or 'none', got 'median'"
    ):
        estimator_name(AdvantageKnobs(scale="median"))


def test_a_name_or_spec_value_cannot_be_registered_twice():
    def estimator(scored, *, eps, batch_std):
        return scored.rewards

    with pytest.raises(ValueError, match="registered twice"):
        register_advantage("grpo", knob="scale_rewards", value="median")(estimator)
    with pytest.raises(ValueError, match="registered twice"):
        register_advantage("median", knob="scale_rewards", value="group")(estimator)
    with pytest.raises(ValueError, match="chosen by one of"):
        register_advantage("median", knob="loss_type", value="median")(estimator)
    assert "median" not in ESTIMATORS


# (B=2, G=2): group 0 [1, 0] (mean .5, std .5), group 1 [3, 3] (flat)
REWARDS = torch.tensor([[1.0, 0.0], [3.0, 3.0]], dtype=torch.float64)
BATCH_STD = 1.6875**0.5  # batch mean 1.75; ((.75^2 + 1.75^2 + 2 * 1.25^2) / 4) ** .5


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("grpo", [[1.0, -1.0], [0.0, 0.0]]),  # (r - .5) / .5; eps keeps 0 / 0 at 0
        ("grpo_batch_std", [[0.5 / BATCH_STD, -0.5 / BATCH_STD], [0.0, 0.0]]),
        ("dr_grpo", [[0.5, -0.5], [0.0, 0.0]]),  # centred only
    ],
)
def test_each_estimator_by_hand(name, expected):
    estimator = advantage_estimator(name)
    advantages = estimator(ScoredRewards(REWARDS), eps=1e-12, batch_std=population_std)
    torch.testing.assert_close(advantages, torch.tensor(expected, dtype=torch.float64))


def test_gdpo_normalises_each_function_in_its_group_before_the_weighted_sum():
    # f [1, 0 | 1, 1] -> z [1, -1 | 0, 0]; g [0, 0 | 1, 0] -> z [0, 0 | 1, -1]; weights 1, .5
    # s = [1, -1, .5, -.5]; batch population std sqrt(2.5 / 4)
    scored = ScoredRewards(
        REWARDS, {"f": [1.0, 0.0, 1.0, 1.0], "g": [0.0, 0.0, 1.0, 0.0]}, {"f": 1.0, "g": 0.5}
    )
    advantages = advantage_estimator("gdpo")(scored, eps=0.0, batch_std=population_std)
    std = 0.625**0.5
    expected = torch.tensor([[1 / std, -1 / std], [0.5 / std, -0.5 / std]], dtype=torch.float64)
    torch.testing.assert_close(advantages, expected)


def test_step_advantages_runs_the_chosen_estimator_then_clips():
    knobs = AdvantageKnobs(scale="none", eps=0.0, clip=0.25)
    advantages = step_advantages(ScoredRewards(REWARDS), knobs)
    expected = torch.tensor([[0.25, -0.25], [0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(advantages, expected)


def test_step_advantages_takes_the_batch_std_it_is_given():
    advantages = step_advantages(
        ScoredRewards(REWARDS),
        AdvantageKnobs(scale="batch", eps=0.0),
        lambda flat: flat.new_tensor(2.0),
    )
    torch.testing.assert_close(
        advantages, torch.tensor([[0.25, -0.25], [0.0, 0.0]], dtype=torch.float64)
    )
