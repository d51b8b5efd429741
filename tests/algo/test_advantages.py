"""Group-relative advantages against numbers worked by hand (grpo/algo/advantages.py)."""

import pytest
import torch

from grpo.algo.advantages import clip_advantages, group_advantages


def test_advantages_are_per_group_z_scores():
    rewards = torch.tensor(
        [[1.0, 0.0], [3.0, 3.0]]
    )  # (B=2, G=2): mean .5, std .5 -> +1, -1; then 0, 0
    adv = group_advantages(rewards, eps=1e-6)
    torch.testing.assert_close(adv, torch.tensor([[1.0, -1.0], [0.0, 0.0]]), atol=1e-4, rtol=0)


def test_two_pass_two_fail_gives_equal_and_opposite_unit_advantages():
    rewards = torch.tensor([[1.0, 0.0, 1.0, 0.0]])  # mean .5, population std .5 -> +-1
    adv = group_advantages(rewards)
    assert float(adv.mean()) == pytest.approx(0.0, abs=1e-7)
    assert adv[0, 0] > 0 and adv[0, 1] < 0
    assert float(adv[0, 0]) == pytest.approx(-float(adv[0, 1]))
    torch.testing.assert_close(adv, torch.tensor([[1.0, -1.0, 1.0, -1.0]]), atol=1e-6, rtol=0)


def test_one_success_in_four_uses_population_std():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0]])  # mean .25, std sqrt(3)/4 = .4330
    adv = group_advantages(rewards)
    expected = torch.tensor([[0.75, -0.25, -0.25, -0.25]]) / 0.4330127
    torch.testing.assert_close(adv, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_all_equal_groups_give_exact_zeros_not_nan(scale):
    rewards = torch.tensor([[0.1, 0.1, 0.1], [0.0, 0.0, 0.0], [2.0, 2.0, 2.0]])
    adv = group_advantages(rewards, scale=scale)
    assert torch.equal(adv, torch.zeros_like(rewards))


def test_batch_scale_divides_by_one_std_over_the_whole_batch():
    rewards = torch.tensor(
        [[1.0, 0.0], [3.0, 3.0]]
    )  # batch mean 1.75, var (0.5625+3.0625+1.5625*2)/4 = 1.6875
    adv = group_advantages(rewards, scale="batch", eps=0.0)
    std = 1.6875**0.5
    torch.testing.assert_close(adv, torch.tensor([[0.5 / std, -0.5 / std], [0.0, 0.0]]))


def test_none_scale_only_centres_rewards():
    rewards = torch.tensor([[2.0, 0.0, 1.0]])
    torch.testing.assert_close(
        group_advantages(rewards, scale="none"), torch.tensor([[1.0, -1.0, 0.0]])
    )


def test_float64_rewards_stay_float64():
    adv = group_advantages(torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    assert adv.dtype == torch.float64


@pytest.mark.parametrize(
    ("rewards", "message"),
    [
        (torch.tensor([1.0, 0.0]), "2-D"),
        (torch.tensor([[1.0], [0.0]]), "G >= 2"),
        (torch.tensor([[1.0, float("nan")]]), "NaN"),
        (torch.tensor([[1.0, float("inf")]]), "infinite"),
    ],
)
def test_bad_rewards_raise_value_error_naming_the_problem(rewards, message):
    with pytest.raises(ValueError, match=message):
        group_advantages(rewards)


def test_unknown_scale_raises():
    with pytest.raises(ValueError, match="scale"):
        group_advantages(torch.tensor([[1.0, 0.0]]), scale="median")


def test_advantage_clip_bounds_magnitude():
    adv = torch.tensor([[3.0, -0.5, -2.5]])
    torch.testing.assert_close(clip_advantages(adv, 2.0), torch.tensor([[2.0, -0.5, -2.0]]))
    assert clip_advantages(adv, None) is adv
