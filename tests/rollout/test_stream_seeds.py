"""Every sampling stream's seed comes from one formula (grpo/rollout/sampling.py's
stream_seed), with the values each stream always had: worked by hand here, so a change of
the formula that would move what a run samples fails."""

from __future__ import annotations

from grpo.engines.tool_loop import trajectory_seed
from grpo.engines.vllm import completion_seed
from grpo.rollout.sampling import eval_seed, group_seed


def test_a_group_seed_is_seed_step_round_then_position():
    assert group_seed(0, 1, 0) == 1 * 1_000_033
    # (42 * 1_000_003 + 3 + 1 * 1_000_000_007) * 1_000_033 + 2
    assert group_seed(42, 3, 2, 1) == 1_042_034_522_004_490


def test_an_eval_seed_has_no_group_stride():
    assert eval_seed(0, 0) == 7_919_000  # EVAL_ROUND * 7_919
    assert eval_seed(7, 5) == 7 * 1_000_003 + 7_919_000 + 5


def test_a_trajectory_seed_comes_from_its_groups():
    assert trajectory_seed(7, 1, 2) == (7 * 1_000_039 + 1) * 1_000_081 + 2


def test_a_vllm_completion_seed_fits_31_bits():
    assert completion_seed(5, 2) == 5 * 1_000_003 + 1 + 2 * 7_919
    big = group_seed(2**32 - 1, 10**6, 99, 63)
    assert completion_seed(big, 3) == (big * 1_000_003 + 3 * 7_919 + 1) % (2**31 - 1)


def test_seeds_stay_under_the_modulus():
    assert group_seed(2**32 - 1, 10**9, 10**6, 63) < 2**63 - 1
