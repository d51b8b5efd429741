"""The staleness rules of asynchronous GRPO (grpo/rollout/staleness.py) against numbers worked by
hand.

The case: step 5 trains at version 4 (four updates before it), G = 2, max_staleness 1.
  completions' versions [4, 4 | 3, 3 | 2, 3 | 1, 1]
  group lag (oldest completion): 4-4=0, 4-3=1, 4-2=2, 4-1=3
  trained: groups 0 and 1 (lag <= 1); dropped: 2 and 3
  async/staleness_mean over the trained (0 + 1) / 2 = 0.5, max 1, dropped 2
The producer's gate: step 5 may be sampled by version 3 (lag 1) but not by version 2.
"""

import pytest
import torch

from grpo.rollout.staleness import (
    busy_fraction,
    fresh_groups,
    group_staleness,
    may_sample,
    staleness_scalars,
    trained_version,
)

VERSIONS = torch.tensor([4, 4, 3, 3, 2, 3, 1, 1])  # (N=8,), G=2


def test_a_group_is_as_stale_as_its_oldest_completion() -> None:
    assert trained_version(5) == 4
    lag = group_staleness(5, VERSIONS, num_generations=2)
    assert lag.tolist() == [0, 1, 2, 3]


def test_groups_staler_than_the_bound_are_left_out_and_counted() -> None:
    lag = group_staleness(5, VERSIONS, num_generations=2)
    fresh = fresh_groups(lag, max_staleness=1)
    assert fresh == [0, 1]
    scalars = staleness_scalars(lag[fresh], dropped=len(lag) - len(fresh))
    assert scalars == {
        "async/staleness_mean": 0.5,
        "async/staleness_max": 1.0,
        "async/dropped_stale": 2.0,
    }
    assert fresh_groups(lag, max_staleness=0) == [0]
    assert fresh_groups(lag, max_staleness=3) == [0, 1, 2, 3]


def test_no_group_trained_reports_zero_staleness() -> None:
    assert staleness_scalars(torch.zeros(0, dtype=torch.long), dropped=4) == {
        "async/staleness_mean": 0.0,
        "async/staleness_max": 0.0,
        "async/dropped_stale": 4.0,
    }


@pytest.mark.parametrize(
    ("step", "version", "max_staleness", "allowed"),
    [
        (5, 3, 1, True),  # trained at 4: lag 1
        (5, 2, 1, False),  # lag 2
        (1, 0, 0, True),  # the first step, sampled by the starting weights
        (2, 0, 0, False),  # max_staleness 0: step 2 waits for the weights of update 1
        (2, 1, 0, True),
        (7, 2, 4, True),  # trained at 6: lag 4
    ],
)
def test_the_producer_samples_a_step_only_within_the_bound(
    step: int, version: int, max_staleness: int, allowed: bool
) -> None:
    assert may_sample(step, version, max_staleness) is allowed


def test_busy_fraction_is_a_share_of_wall_time() -> None:
    assert busy_fraction(1.5, 2.0) == 0.75
    assert busy_fraction(3.0, 2.0) == 1.0  # clock skew between threads: never above 1
    assert busy_fraction(1.0, 0.0) == 0.0
