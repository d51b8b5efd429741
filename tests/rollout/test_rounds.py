"""grpo/rollout/rounds.py: what a step's round holds depends only on (seed, step, round), and the
prompt budget is counted per step."""

from __future__ import annotations

import torch

from grpo.report.timing import StepClock
from grpo.training.trainer import TrainingLoop
from tests.training.test_trainer import tiny_spec


def tiny_trainer(tmp_path, cache_dir, **overrides) -> TrainingLoop:
    return TrainingLoop(tiny_spec(**overrides), workdir=tmp_path, cache_dir=cache_dir)


def test_a_round_depends_on_seed_step_and_round_only(tmp_path, grpo_cache_dir):
    rounds = tiny_trainer(tmp_path, grpo_cache_dir).rounds
    first = rounds.sample_round(3, 0, StepClock())
    rounds.sample_round(1, 0, StepClock())  # another step and a reserve round in between
    rounds.sample_round(3, 1, StepClock())
    torch.manual_seed(1234)  # the global RNG is not what samples
    again = rounds.sample_round(3, 0, StepClock())
    assert again.prompts == first.prompts and again.texts == first.texts
    torch.testing.assert_close(again.advantages, first.advantages, atol=0, rtol=0)
    reserve = rounds.sample_round(3, 1, StepClock())
    assert reserve.prompts != first.prompts  # a reserve stream: other prompts
    assert rounds.sample_round(4, 0, StepClock()).prompts != first.prompts


def test_advantages_are_group_z_scores_of_the_rounds_rewards(tmp_path, grpo_cache_dir):
    rounds = tiny_trainer(tmp_path, grpo_cache_dir).rounds
    rewards = torch.tensor([[1.0, 0.0, 0.0], [2.0, 2.0, 2.0]])  # (B=2, G=3)
    # group 0: mean 1/3, population std sqrt(2/9) = 0.4714 -> (2/3) / 0.4714 = 1.4142 and
    # (-1/3) / 0.4714 = -0.7071; group 1: all equal -> 0
    advantages = rounds.compute_advantages(rewards, {"regex": rewards.flatten().tolist()})
    expected = torch.tensor([[1.4142, -0.7071, -0.7071], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(advantages, expected, atol=1e-3, rtol=0)


def test_truncated_prompts_are_counted_per_step(tmp_path, grpo_cache_dir):
    rounds = tiny_trainer(tmp_path, grpo_cache_dir, max_prompt_length=2).rounds
    rounds.sample(1, StepClock())
    assert rounds.truncated_prompts == 2  # both prompts of the step cut to 2 tokens
    rounds.sample(2, StepClock())
    assert rounds.truncated_prompts == 2  # the step's own, not a running total
