"""GSPO ratios, two-sided clipping, CISPO, the entropy mask and bonus (grpo/algo/loss.py),
against numbers worked by hand: value and gradient of each.

Log-ratios are set by old_logps = 0, so logps are the log-ratios themselves.
"""

import math
from typing import get_args

import pytest
import torch

from grpo.algo.loss import (
    AGGREGATIONS,
    OBJECTIVES,
    LossExtras,
    LossKnobs,
    entropy_bonus,
    grpo_loss,
    high_entropy_mask,
    importance_ratio,
)
from grpo.spec import JobSpec
from grpo.spec.algorithm import LOSS_TYPES


def leaf(rows):
    return torch.tensor(rows, dtype=torch.float64, requires_grad=True)


def test_sequence_ratio_is_exp_of_mean_log_ratio_over_unmasked_tokens():
    # row 0: log-ratios [0.2, -0.1, (5.0 masked)] -> s = exp(0.05); row 1: exp(0.5)
    logps = leaf([[0.2, -0.1, 5.0], [0.5, 0.5, 0.5]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    ratio = importance_ratio(logps, torch.zeros_like(logps), mask, level="sequence")
    assert ratio.shape == (2, 1)
    torch.testing.assert_close(
        ratio.squeeze(1), torch.tensor([math.exp(0.05), math.exp(0.5)], dtype=torch.float64)
    )


def test_gspo_loss_and_gradient_by_hand_with_a_masked_token():
    # row 0, A=+1: s = exp(0.05) = 1.051271 inside [0.8, 1.2]: per-token -s, row loss -s,
    #   d/dlogp_t = -s / 2 on its two unmasked tokens, 0 on the masked one
    # row 1, A=-1: s = exp(0.5) = 1.648721 > 1.2, A < 0 keeps the unclipped -s*A = +s,
    #   d/dlogp_t = s / 3
    # grpo: mean of rows = (-1.051271 + 1.648721) / 2, gradients halved
    logps = leaf([[0.2, -0.1, 5.0], [0.5, 0.5, 0.5]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    loss, metrics = grpo_loss(
        logps,
        torch.zeros_like(logps),
        None,
        adv,
        mask,
        LossKnobs(beta=0.0, importance_sampling_level="sequence"),
    )
    s0, s1 = math.exp(0.05), math.exp(0.5)
    assert loss.item() == pytest.approx((-s0 + s1) / 2, abs=1e-12)
    loss.backward()
    expected = [[-s0 / 4, -s0 / 4, 0.0], [s1 / 6, s1 / 6, s1 / 6]]
    torch.testing.assert_close(logps.grad, torch.tensor(expected, dtype=torch.float64))
    # row 1's ratio is past 1 + epsilon but A < 0: no clip is active anywhere
    assert metrics["clip_ratio/region"] == 0.0


def test_sequence_ratio_clips_the_whole_sequence():
    # A=+1, s = exp(0.3) = 1.3499 > 1.2: clipped, loss -1.2 and no gradient on any token
    logps = leaf([[0.3, 0.3]])
    mask = torch.ones(1, 2, dtype=torch.float64)
    loss, metrics = grpo_loss(
        logps,
        torch.zeros_like(logps),
        None,
        torch.tensor([1.0], dtype=torch.float64),
        mask,
        LossKnobs(beta=0.0, importance_sampling_level="sequence"),
    )
    assert loss.item() == pytest.approx(-1.2)
    loss.backward()
    torch.testing.assert_close(logps.grad, torch.zeros(1, 2, dtype=torch.float64))
    assert metrics["clip_ratio/high"] == 1.0


# delta case, dapo (sum / 6 tokens), epsilon 0.2, delta 2, log-ratios [1, 0.4, ln 0.5]:
#   ratios [e = 2.71828, 1.49182, 0.5]
#   row 0, A=-1: [min(e, 2) = 2 (capped: no gradient), 1.49182 (grad 1.49182), 0.8 (clip)]
#        without delta the first is e with gradient e
#   row 1, A=+1: [-1.2 (clip), -1.2 (clip), -0.5 (grad -0.5)]: delta changes nothing for A > 0
DELTA_LOGS = [[1.0, 0.4, math.log(0.5)], [1.0, 0.4, math.log(0.5)]]


@pytest.mark.parametrize("delta", [None, 2.0])
def test_delta_caps_the_ratio_for_negative_advantages_only(delta):
    logps = leaf(DELTA_LOGS)
    adv = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    mask = torch.ones(2, 3, dtype=torch.float64)
    loss, metrics = grpo_loss(
        logps,
        torch.zeros_like(logps),
        None,
        adv,
        mask,
        LossKnobs(beta=0.0, loss_type="dapo", delta=delta),
    )
    first = math.e if delta is None else 2.0
    assert loss.item() == pytest.approx((first + 1.491825 + 0.8 - 1.2 - 1.2 - 0.5) / 6, abs=1e-6)
    loss.backward()
    first_grad = math.e / 6 if delta is None else 0.0
    expected = [[first_grad, math.exp(0.4) / 6, 0.0], [0.0, 0.0, -0.5 / 6]]
    torch.testing.assert_close(logps.grad, torch.tensor(expected, dtype=torch.float64))
    if delta is not None:
        assert metrics["clip_ratio/delta"] == pytest.approx(1 / 6)


def test_cispo_weights_every_token_by_the_capped_detached_ratio():
    # logp [-1, -2], old [-2, -1.9]: ratios [e, exp(-0.1) = 0.904837]; cap 2 -> w [2, 0.904837]
    # A=+1: per-token -w*A*logp = [2, 1.809675]; dapo mean = 1.904837
    # gradient -w*A/2 = [-1, -0.452419]: the capped token still learns, only its weight is bounded
    logps = leaf([[-1.0, -2.0]])
    old = torch.tensor([[-2.0, -1.9]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.float64)
    loss, metrics = grpo_loss(
        logps,
        old,
        None,
        torch.tensor([1.0], dtype=torch.float64),
        mask,
        LossKnobs(beta=0.0, loss_type="cispo", epsilon_high=2.0),
    )
    w1 = math.exp(-0.1)
    assert loss.item() == pytest.approx((2.0 + 2 * w1) / 2, abs=1e-12)
    loss.backward()
    torch.testing.assert_close(logps.grad, torch.tensor([[-1.0, -w1 / 2]], dtype=torch.float64))
    assert metrics["clip_ratio/cispo"] == 0.5


ENTROPIES = [[0.1, 0.5, 0.9], [0.3, 0.7, 9.0]]
ENTROPY_TOKENS = [[1, 1, 1], [1, 1, 0]]


def test_high_entropy_mask_keeps_the_top_quantile_of_unmasked_tokens():
    # unmasked entropies sorted [0.1, 0.3, 0.5, 0.7, 0.9]; the 0.6 quantile is at 2.4 of 4:
    # 0.5 + 0.4 * 0.2 = 0.58, so 0.9 and 0.7 stay; the masked 9.0 never counts
    kept = high_entropy_mask(torch.tensor(ENTROPIES), torch.tensor(ENTROPY_TOKENS), quantile=0.4)
    assert kept.tolist() == [[False, False, True], [False, True, False]]
    everything = high_entropy_mask(
        torch.tensor(ENTROPIES), torch.tensor(ENTROPY_TOKENS), quantile=1.0
    )
    assert everything.tolist() == [[True, True, True], [True, True, False]]
    top_only = high_entropy_mask(
        torch.tensor(ENTROPIES), torch.tensor(ENTROPY_TOKENS), quantile=0.0
    )
    assert top_only.tolist() == [[False, False, True], [False, False, False]]


def test_entropy_mask_removes_policy_terms_but_keeps_the_kl_everywhere():
    # ratios 1 (logps = old = 0), A = +1: per-token policy term -1 on kept tokens only;
    # ref - logp = ln 2 on every token: k3 = 2 - ln 2 - 1 = 0.306853 each, beta 0.1
    # dapo over 5 tokens: (-2 + 5 * 0.0306853) / 5; gradient: -1/5 on kept tokens from the
    # policy term, plus beta * (1 - exp(ref - logp)) / 5 = 0.1 * (1 - 2) / 5 on every token
    logps = leaf([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor(ENTROPY_TOKENS, dtype=torch.float64)
    kept = high_entropy_mask(torch.tensor(ENTROPIES), mask, quantile=0.4)
    ref = torch.full((2, 3), math.log(2), dtype=torch.float64)
    loss, metrics = grpo_loss(
        logps,
        torch.zeros_like(logps),
        ref,
        torch.tensor([1.0, 1.0], dtype=torch.float64),
        mask,
        LossKnobs(beta=0.1, loss_type="dapo"),
        LossExtras(entropy_mask=kept),
    )
    k3 = 2 - math.log(2) - 1
    assert loss.item() == pytest.approx((-2 + 5 * 0.1 * k3) / 5, abs=1e-12)
    loss.backward()
    expected = torch.full((2, 3), -0.1 / 5, dtype=torch.float64) + torch.where(
        kept, -1 / 5, 0.0
    ).to(torch.float64)
    torch.testing.assert_close(logps.grad, expected * mask)
    assert metrics["kl"] == pytest.approx(k3)


def test_entropy_bonus_subtracts_coef_times_the_mean_entropy_of_kept_tokens():
    # kept entropies 0.9 and 0.7 -> bonus 0.8; coef 0.5 lowers the loss by 0.4 and gives
    # each kept token's entropy the gradient -0.5 / 2
    logps = leaf([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor(ENTROPY_TOKENS, dtype=torch.float64)
    entropies = leaf(ENTROPIES)
    kept = high_entropy_mask(entropies.detach(), mask, quantile=0.4)
    args = (logps, torch.zeros_like(logps), None, torch.zeros(2, dtype=torch.float64), mask)
    base, _ = grpo_loss(*args, LossKnobs(beta=0.0), LossExtras(entropy_mask=kept))
    loss, _ = grpo_loss(
        *args,
        LossKnobs(beta=0.0, entropy_coef=0.5),
        LossExtras(entropy_mask=kept, entropies=entropies),
    )
    assert (loss - base).item() == pytest.approx(-0.4, abs=1e-12)
    loss.backward()
    torch.testing.assert_close(
        entropies.grad, torch.tensor([[0, 0, -0.25], [0, -0.25, 0]], dtype=torch.float64)
    )


def test_entropy_bonus_in_pieces_sums_to_the_whole_with_the_global_token_count():
    entropies = torch.tensor(ENTROPIES, dtype=torch.float64)
    mask = torch.tensor(ENTROPY_TOKENS, dtype=torch.float64)
    whole = entropy_bonus(entropies, mask)
    count = float(mask.sum())
    pieces = sum(entropy_bonus(entropies[i : i + 1], mask[i : i + 1], count) for i in range(2))
    torch.testing.assert_close(pieces, whole)
    assert whole.item() == pytest.approx((0.1 + 0.5 + 0.9 + 0.3 + 0.7) / 5)


def test_bad_variant_arguments_raise():
    logps = torch.zeros(1, 2)
    args = (logps, logps, None, torch.ones(1), torch.ones(1, 2))
    with pytest.raises(ValueError, match="importance_sampling_level"):
        grpo_loss(*args, LossKnobs(beta=0.0, importance_sampling_level="group"))
    with pytest.raises(ValueError, match="entropies"):
        grpo_loss(*args, LossKnobs(beta=0.0, entropy_coef=0.1))


def test_every_loss_type_is_an_objective_and_an_aggregation_the_loss_computes():
    """One LOSS_TYPES entry per loss_type; the spec accepts exactly those names, and each
    names an objective and an aggregation grpo/algo/loss.py has."""
    assert get_args(JobSpec.model_fields["loss_type"].annotation) == tuple(LOSS_TYPES)
    for name, recipe in LOSS_TYPES.items():
        assert recipe.objective in OBJECTIVES, f"{name}: no objective {recipe.objective!r}"
        assert recipe.aggregation in AGGREGATIONS, f"{name}: no aggregation {recipe.aggregation!r}"
