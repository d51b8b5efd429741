"""grpo/training/step_loss.py: the whole-step numbers every micro-batch's loss divides by."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from grpo.parallel.ranks import SINGLE
from grpo.rollout.rollout import Rollout, concat_rollouts
from grpo.spec import JobSpec, RegexReward
from grpo.training.step_loss import (
    UpdateInputs,
    loss_mask_of,
    mask_share,
    start_counts,
    step_loss_terms,
)


def rollout() -> Rollout:
    """1 prompt, G = 2: a 3-token completion ending in EOS and a 4-token truncated one."""
    return Rollout(
        prompt_ids=torch.tensor([[5, 6]]),
        prompt_mask=torch.ones(1, 2, dtype=torch.long),
        completion_ids=torch.tensor([[1, 2, 0, 0], [3, 4, 5, 6]]),
        completion_mask=torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]),
        is_truncated=torch.tensor([False, True]),
        entropy=torch.tensor([[0.1, 0.9, 0.2, 1.0], [0.8, 0.3, 0.7, 0.4]]),  # 1.0: padding
    )


def spec(**overrides) -> JobSpec:
    knobs = dict(
        model="builtin:tiny", rewards=(RegexReward(pattern="x"),), num_generations=2,
        prompts_per_step=1, max_completion_length=5,
    )  # fmt: skip
    return JobSpec(**{**knobs, **overrides})


def test_overlong_filtering_drops_truncated_completions_from_the_loss_mask():
    assert loss_mask_of(rollout(), spec()).tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    masked = loss_mask_of(rollout(), spec(mask_truncated_completions=True))
    assert masked.tolist() == [[1, 1, 1, 0], [0, 0, 0, 0]]


def test_tokens_put_in_the_models_context_leave_the_loss_mask_and_the_token_count():
    # row 1's middle two tokens are a tool result (model_mask 0): never trained on
    tools = replace(rollout(), model_mask=torch.tensor([[1, 1, 1, 1], [1, 0, 0, 1]]))
    assert loss_mask_of(tools, spec()).tolist() == [[1, 1, 1, 0], [1, 0, 0, 1]]
    assert start_counts(loss_mask_of(tools, spec()))() == [2.0, 5.0]  # rows, 3 + 2 tokens
    masked = loss_mask_of(tools, spec(mask_truncated_completions=True))
    assert masked.tolist() == [[1, 1, 1, 0], [0, 0, 0, 0]]
    both = concat_rollouts([tools, tools.select_groups(torch.tensor([0]))], pad_token_id=0)
    assert both.model_mask is not None and both.model_mask.shape == (4, 4)
    with pytest.raises(ValueError, match="with and without"):
        concat_rollouts([tools, rollout()], pad_token_id=0)


@pytest.mark.parametrize(
    ("loss_type", "is_masked", "normalizer"),
    [
        ("grpo", False, 2.0),  # rows
        ("bnpo", False, 7.0),  # loss tokens: 3 + 4
        ("dapo", False, 7.0),
        ("cispo", False, 7.0),
        ("dr_grpo", False, 10.0),  # rows x max_completion_length 5, not the width 4
        ("grpo", True, 2.0),  # a fully masked row still counts as a row
        ("dapo", True, 3.0),  # the truncated completion's 4 tokens leave the count
    ],
)
def test_the_normaliser_counts_the_whole_step(loss_type, is_masked, normalizer):
    cap = {"epsilon_high": 5.0} if loss_type == "cispo" else {}  # cispo's own cap
    job = spec(loss_type=loss_type, beta=0.0, mask_truncated_completions=is_masked, **cap)
    mask = loss_mask_of(rollout(), job)
    counts = start_counts(mask)
    tokens = 3.0 if is_masked else 7.0
    assert counts() == [2.0, tokens]
    inputs = UpdateInputs(torch.zeros(2), None, mask, 0.0)
    terms = step_loss_terms(rollout(), None, inputs, counts, job, SINGLE)
    assert terms.normalizer == normalizer and terms.step_tokens == tokens


def test_the_entropy_mask_keeps_the_steps_top_quantile_and_reports_what_it_left_out():
    job = spec(top_entropy_quantile=0.25, beta=0.0)
    mask = loss_mask_of(rollout(), job)
    inputs = UpdateInputs(torch.zeros(2), None, mask, 0.0)
    terms = step_loss_terms(rollout(), None, inputs, start_counts(mask), job, SINGLE)
    # the 7 loss tokens' entropies (padding's 1.0 left out), sorted 0.1 0.2 0.3 0.4 0.7 0.8
    # 0.9: the 0.75 quantile sits at position 0.75 x 6 = 4.5, between 0.7 and 0.8, so 0.75;
    # the tokens at 0.9 and 0.8 stay: 2 of 7
    assert terms.entropy_mask is not None
    assert terms.entropy_mask.tolist() == [[False, True, False, False], [True, False, False, False]]
    assert terms.entropy_tokens == 2.0
    assert mask_share(terms) == {"entropy_masked_share": pytest.approx(5 / 7)}
