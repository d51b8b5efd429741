"""bench/step_cost.py: the fixed and per-prompt cost of a step, and the data-parallel bound
they set, against numbers worked by hand; one short real measurement."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_module import load_bench


def step_cost() -> ModuleType:
    return load_bench("step_cost")


def test_fit_line_gives_intercept_and_slope() -> None:
    fit_line = step_cost().fit_line
    # on a line: 30 ms fixed, 2.5 ms a prompt
    assert fit_line([1.0, 8.0, 16.0, 32.0], [32.5, 50.0, 70.0, 110.0]) == pytest.approx((30, 2.5))
    # off it, by hand: mean x 1, mean y 7/3, Sxx 2, Sxy 4/3 + 5/3 = 3 -> slope 1.5, 7/3 - 1.5
    assert fit_line([0.0, 1.0, 2.0], [1.0, 2.0, 4.0]) == pytest.approx((5 / 6, 1.5))


def test_fit_doubt_names_a_negative_cost_or_a_poor_fit() -> None:
    doubt = step_cost().fit_doubt
    assert doubt([1.0, 8.0, 16.0, 32.0], [32.5, 50.0, 70.0, 110.0]) is None  # on the line
    # falling with size: fixed 10.5 ms, -0.5 ms a prompt
    assert "negative cost" in str(doubt([1.0, 3.0], [0.010, 0.009]))
    # by hand: the fit above (5/6 + 1.5 x) leaves 1/36 + 1/9 + 1/36 = 1/6 of Syy 14/3: R^2
    # 0.964; a zigzag 1, 3, 1, 3 leaves most of it: slope 0.4, R^2 0.2
    assert doubt([0.0, 1.0, 2.0], [1.0, 2.0, 4.0]) is None
    assert "0.20 of the variance" in str(doubt([0.0, 1.0, 2.0, 3.0], [1.0, 3.0, 1.0, 3.0]))


def test_ideal_ratio_is_a_ranks_share_over_the_whole_step() -> None:
    ratio = step_cost().ideal_ratio
    # fixed 35 ms, 2.75 ms a prompt, 32 prompts: (35 + 44) / (35 + 88) = 79 / 123
    assert ratio(0.035, 0.00275, prompts=32, ranks=2) == pytest.approx(79 / 123)
    assert ratio(0.0, 0.00275, prompts=32, ranks=2) == pytest.approx(0.5)  # no fixed cost
    assert ratio(0.035, 0.0, prompts=32, ranks=2) == pytest.approx(1.0)  # nothing splits


def test_phase_seconds_puts_the_unnamed_rest_of_the_step_in_other() -> None:
    scalars = {"time/generate": 0.03, "time/reward": 0.01, "time/reference": 0.02,
               "time/train": 0.05, "time/step": 0.12, "tokens_per_second": 1.0}  # fmt: skip
    phases = step_cost().phase_seconds(scalars)
    assert phases["other"] == pytest.approx(0.01)
    assert phases["step"] == 0.12 and phases["train"] == 0.05


def test_measure_times_every_phase_at_every_count(
    grpo_cache_dir: Path, one_torch_thread: None
) -> None:
    data = {"model": "builtin:tiny", "prompts_per_step": 2, "num_generations": 2,
            "max_completion_length": 3, "rewards": [{"name": "accuracy"}]}  # fmt: skip
    medians = step_cost().measure(data, [1, 2], steps=3, cache=grpo_cache_dir)
    assert sorted(medians) == [1, 2]
    for phases in medians.values():
        assert set(phases) == {"generate", "reward", "reference", "train", "other", "step"}
        assert phases["step"] >= phases["train"] > 0 and phases["generate"] > 0
