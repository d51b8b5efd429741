"""normalize_then_sum (GDPO) against numbers worked by hand (grpo/algo/advantages.py)."""

import math

import torch

from grpo.algo.advantages import decoupled_advantages, group_advantages

NAN = float("nan")


def test_each_function_is_normalised_in_its_group_before_the_weighted_sum():
    # (B=2, G=2, K=2), weights [1, 0.5]
    # group 0: f1 [1, 0] -> z [1, -1]; f2 [0, 0] flat -> 0; s = [1, -1]
    # group 1: f1 [1, 1] flat -> 0; f2 [1, 0] -> z [1, -1]; s = 0.5 * [1, -1]
    # batch population std of [1, -1, .5, -.5] = sqrt(2.5 / 4) = 0.790569
    scores = torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 0.0]]])
    adv = decoupled_advantages(scores, torch.tensor([1.0, 0.5]), eps=1e-8)
    std = math.sqrt(0.625)
    expected = torch.tensor([[1 / std, -1 / std], [0.5 / std, -0.5 / std]])
    torch.testing.assert_close(adv, expected)
    # summing first: group 0 totals [1, 0], group 1 [1.5, 1]: both become [+1, -1]
    summed = (scores * torch.tensor([1.0, 0.5])).sum(dim=2)
    torch.testing.assert_close(group_advantages(summed), torch.tensor([[1.0, -1.0], [1.0, -1.0]]))


def test_not_applicable_rewards_are_left_out_of_their_functions_statistics():
    # G=3: f1 [1, 0, 0]: mean 1/3, std sqrt(2/9) -> z [sqrt 2, -1/sqrt 2, -1/sqrt 2]
    #      f2 [None, 1, 0]: mean .5 over the two, std .5 -> z [0, 1, -1]
    # s = [1.414214, 0.292893, -1.707107] (sums to 0); batch std sqrt(5/3) = 1.290994
    scores = torch.tensor([[[1.0, NAN], [0.0, 1.0], [0.0, 0.0]]])
    adv = decoupled_advantages(scores, torch.tensor([1.0, 1.0]), eps=0.0)
    r2 = math.sqrt(2)
    s = torch.tensor([[r2, 1 - 1 / r2, -1 - 1 / r2]])
    torch.testing.assert_close(adv, s / math.sqrt(5 / 3))


def test_a_completion_no_function_applies_to_gets_zero_and_stays_out_of_the_std():
    # f1 [1, 0, None] -> z [1, -1, -]; f2 all None; s = [1, -1, 0]; std over [1, -1] = 1
    scores = torch.tensor([[[1.0, NAN], [0.0, NAN], [NAN, NAN]]])
    adv = decoupled_advantages(scores, torch.tensor([1.0, 2.0]), eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([[1.0, -1.0, 0.0]]))


def test_all_flat_groups_get_exactly_zero():
    scores = torch.full((2, 3, 2), 0.1)
    assert decoupled_advantages(scores, torch.ones(2)).eq(0).all()


def test_reward_table_lays_functions_last_and_none_as_nan():
    from grpo.algo.advantages import reward_table

    table = reward_table({"a": [1.0, 0.0, 1.0, 1.0], "b": [None, 2.0, 3.0, 4.0]}, num_groups=2)
    assert table.shape == (2, 2, 2)
    assert table[0, 0, 0] == 1.0 and math.isnan(table[0, 0, 1])
    assert table[1, 1].tolist() == [1.0, 4.0]
