"""grpo/parallel/rank_parts.py: the step's scalars from the parts every rank contributes."""

from __future__ import annotations

import pytest
import torch

from grpo.parallel.rank_parts import RankPart, step_scalars, whole_step
from grpo.parallel.ranks import SINGLE


def part(**overrides) -> RankPart:
    fields = dict(
        rewards=torch.tensor([[1.0, 0.0], [1.0, 1.0]]),  # (B=2, G=2)
        scores={"accuracy": [1.0, 0.0, 1.0, 1.0]},
        passes=[True, False, True, True],
        lengths=torch.tensor([3, 5, 2, 6]),
        is_truncated=torch.tensor([False, True, False, False]),
        entropy=(6.0, 16.0),
        groups=[],
        timings={"time/step": 0.5, "time/generate": 0.2},
        truncated_prompts=1,
    )
    return RankPart(**{**fields, **overrides})


def test_step_scalars_by_hand():
    scalars = step_scalars(part(), {"loss": 0.25, "kl": 0.01}, beta=0.04, learning_rate=1e-4)
    assert scalars["reward"] == pytest.approx(0.75)  # 3 of 4
    assert scalars["reward_std"] == pytest.approx(0.4330, abs=1e-4)  # sqrt(3/16)
    assert scalars["entropy"] == pytest.approx(6 / 16)
    assert scalars["tokens_per_second"] == pytest.approx(16 / 0.5)  # 3+5+2+6 tokens
    assert scalars["completions/mean_length"] == pytest.approx(4.0)
    assert (scalars["beta"], scalars["learning_rate"]) == (0.04, 1e-4)
    assert (scalars["loss"], scalars["kl"], scalars["prompts/truncated"]) == (0.25, 0.01, 1.0)
    assert scalars["time/generate"] == 0.2


def test_a_step_without_kl_reports_kl_zero_and_one_process_is_its_own_whole():
    assert step_scalars(part(), {"loss": 0.0}, beta=0.0, learning_rate=1e-4)["kl"] == 0.0
    mine = part()
    assert whole_step(SINGLE, mine) is mine
