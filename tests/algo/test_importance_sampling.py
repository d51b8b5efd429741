"""vLLM's off-policy correction (grpo/algo/importance_sampling.py) against numbers worked by hand.

The case: N=2 sequences, T=3 tokens, trainer log-prob minus vLLM log-prob per token
  row 0: [ln 4, ln 0.5, ln 1.5], mask [1, 1, 1] -> token ratios [4, 0.5, 1.5], sequence 3
  row 1: [ln 0.1, ln 2, (ln 9)], mask [1, 1, 0] -> token ratios [0.1, 2, (masked)], seq 0.2
with C_min = 0.25, C_max = 2.5:
  token_truncate    [[2.5, 0.5, 1.5], [0.25, 2, 1]]   (masked token: ratio exp(0) = 1)
  token_mask        [[0, 0.5, 1.5], [0, 2, 1]]
  sequence_truncate [[2.5], [0.25]]
  sequence_mask     [[0], [0]]   (3 is above C_max, 0.2 below C_min)
Corrected (truncated or masked) loss tokens: token modes 2 of 5 (4 and 0.1), sequence
modes all 5 (both sequences' ratios are out of bounds).
Gap |old - vllm| over loss tokens: ln 4 + ln 2 + ln 1.5 + ln 10 + ln 2, max ln 10.
"""

import math

import pytest
import torch

from grpo.algo.importance_sampling import corrected_share, importance_weights, logprob_gap
from grpo.algo.loss import LossExtras, LossKnobs, grpo_loss

DIFFS = [[math.log(4), math.log(0.5), math.log(1.5)], [math.log(0.1), math.log(2), math.log(9)]]
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
EXPECTED = {
    "token_truncate": [[2.5, 0.5, 1.5], [0.25, 2.0, 1.0]],
    "token_mask": [[0.0, 0.5, 1.5], [0.0, 2.0, 1.0]],
    "sequence_truncate": [[2.5], [0.25]],
    "sequence_mask": [[0.0], [0.0]],
}
CORRECTED = {"token_truncate": 2, "token_mask": 2, "sequence_truncate": 5, "sequence_mask": 5}


def logps() -> tuple[torch.Tensor, torch.Tensor]:
    sampling = torch.full((2, 3), -2.0)
    return sampling + torch.tensor(DIFFS), sampling


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_each_mode_matches_the_hand_worked_weights(mode: str) -> None:
    old, sampling = logps()
    weights = importance_weights(old, sampling, MASK, mode=mode, clip_min=0.25, clip_max=2.5)
    torch.testing.assert_close(weights, torch.tensor(EXPECTED[mode]), rtol=1e-5, atol=0.0)


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_corrected_tokens_are_the_hand_counted_ones(mode: str) -> None:
    old, sampling = logps()
    weights = importance_weights(old, sampling, MASK, mode=mode, clip_min=0.25, clip_max=2.5)
    share = corrected_share(old, sampling, MASK, weights)
    assert float(share.sum()) == CORRECTED[mode]
    assert float((share * (1 - MASK)).sum()) == 0.0  # padding never counts


def test_missing_bounds_are_no_bounds() -> None:
    old, sampling = logps()
    truncated = importance_weights(
        old, sampling, MASK, mode="token_truncate", clip_min=None, clip_max=None
    )
    torch.testing.assert_close(truncated, torch.tensor([[4.0, 0.5, 1.5], [0.1, 2.0, 1.0]]))
    masked = importance_weights(
        old, sampling, MASK, mode="sequence_mask", clip_min=0.25, clip_max=None
    )
    torch.testing.assert_close(masked, torch.tensor([[3.0], [0.0]]))


def test_unknown_mode_is_refused_by_name() -> None:
    old, sampling = logps()
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode"):
        importance_weights(old, sampling, MASK, mode="token", clip_min=None, clip_max=3.0)


def test_logprob_gap_sums_and_maxes_over_loss_tokens_only() -> None:
    old, sampling = logps()
    total, largest = logprob_gap(old, sampling, MASK)
    expected = math.log(4) + math.log(2) + math.log(1.5) + math.log(10) + math.log(2)
    assert float(total) == pytest.approx(expected, rel=1e-5)
    assert float(largest) == pytest.approx(math.log(10), rel=1e-5)  # ln 9 is padding


def test_weights_multiply_the_policy_term_before_the_kl() -> None:
    """At ratio 1 (mu = 1) the clipped term is -A per token; weighted by w it is -w A, and
    the KL term (beta) is added unweighted (TRL's order). dapo: sum over 5 tokens / 5."""
    logps_ = torch.full((2, 3), -1.0, requires_grad=True)
    advantages = torch.tensor([1.0, -2.0])
    weights = torch.tensor(EXPECTED["token_mask"])
    ref = logps_.detach() + torch.tensor([[math.log(2), 0.0, 0.0], [0.0, 0.0, 0.0]])
    loss, _ = grpo_loss(
        logps_, logps_.detach(), ref, advantages, MASK, LossKnobs(beta=0.1, loss_type="dapo"),
        LossExtras(is_weights=weights),
    )  # fmt: skip
    policy = -(0.0 + 0.5 + 1.5) * 1.0 + 2.0 * (0.0 + 2.0)  # -2 + 4 = 2
    kl = 0.1 * (2 - math.log(2) - 1)
    assert float(loss) == pytest.approx((policy + kl) / 5, rel=1e-5)
