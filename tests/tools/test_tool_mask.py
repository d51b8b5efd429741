"""Tool-result tokens get zero weight in the loss, the KL and the entropy statistic,
worked by hand on a short trajectory (issue 28, point 3).

One group of G=2, T=5 completion tokens, logps = old logps (every ratio 1), beta = 0.1:
  row 0, a tool trajectory, A = +1: model, model, TOOL, TOOL, model (model_mask 1 1 0 0 1)
  row 1, single-turn,      A = -1: three tokens then padding (completion_mask 1 1 1 0 0)
With ratio 1 the clipped term is -A on every token. ref - logp = ln 2 on (0, 1), a model
token (k3 = 2 - ln 2 - 1 = 0.306853), and ln 4 on (0, 2), a tool token (k3 = 4 - ln 4 - 1 =
1.613706, which must not count).
  grpo loss = mean(row means) = ((-1 - 1 - 1 + 0.1 * 0.306853) / 3 + (1 + 1 + 1) / 3) / 2
            = 0.1 * 0.306853 / 6 = 0.00511422
  kl metric = 0.306853 / 6 counted tokens = 0.0511422
Sampling entropies 0.5 on model tokens and 9 on tool tokens: entropy = 0.5 (the nines are
never a sampling distribution's). The gradient at the tool tokens is exactly 0.
"""

import math

import pytest
import torch

from grpo.algo.loss import LossKnobs, grpo_loss
from grpo.data.example import Example
from grpo.parallel.rank_parts import rank_part
from grpo.report.timing import StepClock
from grpo.rollout.dynamic_sampling import Batch
from grpo.rollout.rollout import Rollout
from grpo.spec import JobSpec
from grpo.training.step_loss import loss_mask_of

COMPLETION_MASK = [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
MODEL_MASK = [[1, 1, 0, 0, 1], [1, 1, 1, 1, 1]]


def trajectory_rollout() -> Rollout:
    entropy = torch.tensor([[0.5, 0.5, 9.0, 9.0, 0.5], [0.5, 0.5, 0.5, 0.0, 0.0]])
    return Rollout(
        prompt_ids=torch.ones((1, 2), dtype=torch.long),
        prompt_mask=torch.ones((1, 2), dtype=torch.long),
        completion_ids=torch.ones((2, 5), dtype=torch.long),
        completion_mask=torch.tensor(COMPLETION_MASK),
        is_truncated=torch.tensor([False, False]),
        entropy=entropy,
        model_mask=torch.tensor(MODEL_MASK),
    )


def test_tool_tokens_are_out_of_the_loss_and_the_kl_by_hand():
    rollout = trajectory_rollout()
    mask = loss_mask_of(rollout, JobSpec(beta=0.1))
    assert mask.tolist() == [[1, 1, 0, 0, 1], [1, 1, 1, 0, 0]]
    old = torch.full((2, 5), -1.0)
    logps = old.clone().requires_grad_(True)
    ref = old.clone()
    ref[0, 1] += math.log(2)
    ref[0, 2] += math.log(4)
    loss, metrics = grpo_loss(logps, old, ref, torch.tensor([1.0, -1.0]), mask, LossKnobs(beta=0.1))
    assert float(loss.detach()) == pytest.approx(0.1 * 0.306853 / 6, abs=1e-6)
    assert metrics["kl"] == pytest.approx(0.306853 / 6, abs=1e-6)
    loss.backward()
    assert logps.grad[0, 2:4].eq(0).all() and logps.grad[0, 4] != 0


def test_tool_tokens_are_out_of_the_entropy_statistic():
    rollout = trajectory_rollout()
    example = Example(id="p", prompt="p", answer="a")
    batch = Batch([example], ["p"], rollout, ["x", "y"], {"r": [1.0, 0.0]},
                  torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, -1.0]]))  # fmt: skip
    part = rank_part(batch, [], StepClock(), [True, False], 0)
    assert part.entropy == (3.0, 6.0) and part.mean_entropy == 0.5
    assert part.lengths.tolist() == [3, 3]  # model tokens: the trajectory's 5 less 2 tool tokens
