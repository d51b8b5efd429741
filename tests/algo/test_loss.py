"""The GRPO objective against numbers worked by hand (grpo/algo/loss.py).

The shared case (N=2 sequences, T=3 tokens, epsilon=0.2):
  row 0, A=+1, ratios [1.5, 1.0, 0.9], mask [1, 1, 1]:
      -min(rA, clip(r)A) = [-1.2 (clipped high), -1.0, -0.9]
  row 1, A=-2, ratios [0.5, 1.1, (1.0)], mask [1, 1, 0]:
      -min(-1.0, 0.8*-2=-1.6) = +1.6 (clipped low), -min(-2.2, -2.2) = +2.2, masked
  grpo    = mean(-3.1/3, 3.8/2)      = 0.4333...
  bnpo    = dapo = (-3.1 + 3.8) / 5  = 0.14
  dr_grpo = 0.7 / (2 * 3)            = 0.11666...   (0.7 / (2 * 10) = 0.035 with max 10)
  clip_ratio/low = 1/5, /high = 1/5, /region = 2/5
With beta=0.1 and ref - logp = ln 2 on token (0, 1): k3 = 2 - ln 2 - 1 = 0.306853,
  grpo adds 0.1 * 0.306853 / 3 / 2 = 0.0051142, kl metric = 0.306853 / 5.
"""

import math

import pytest
import torch

from grpo.algo.loss import LossExtras, LossKnobs, aggregate, grpo_loss, k3_kl, loss_normalizer

RATIOS = [[1.5, 1.0, 0.9], [0.5, 1.1, 1.0]]
MASK = [[1, 1, 1], [1, 1, 0]]


def case(dtype=torch.float32):
    old = torch.full((2, 3), -1.0, dtype=dtype)
    logps = (old + torch.tensor(RATIOS, dtype=dtype).log()).requires_grad_(True)
    advantages = torch.tensor([1.0, -2.0], dtype=dtype)
    mask = torch.tensor(MASK, dtype=dtype)
    return logps, old, advantages, mask


@pytest.mark.parametrize(
    ("loss_type", "max_len", "expected"),
    [
        ("grpo", None, (-3.1 / 3 + 3.8 / 2) / 2),
        ("bnpo", None, 0.14),
        ("dapo", None, 0.14),
        ("dr_grpo", None, 0.7 / 6),
        ("dr_grpo", 10, 0.035),
    ],
)
def test_each_loss_type_matches_hand_computation(loss_type, max_len, expected):
    logps, old, adv, mask = case()
    loss, _ = grpo_loss(
        logps,
        old,
        None,
        adv,
        mask,
        LossKnobs(beta=0.0, loss_type=loss_type, max_completion_length=max_len),
    )
    assert loss.item() == pytest.approx(expected, abs=1e-6)


def test_clip_ratio_metrics_count_active_clips_over_unmasked_tokens():
    logps, old, adv, mask = case()
    _, metrics = grpo_loss(logps, old, None, adv, mask, LossKnobs(beta=0.0))
    assert metrics["clip_ratio/low"] == pytest.approx(0.2)
    assert metrics["clip_ratio/high"] == pytest.approx(0.2)
    assert metrics["clip_ratio/region"] == pytest.approx(0.4)
    assert "kl" not in metrics


def test_epsilon_high_widens_only_the_upper_clip():
    logps, old, adv, mask = case()  # ratio 1.5 with eps_high 0.6 is no longer clipped: -1.5
    loss, metrics = grpo_loss(
        logps, old, None, adv, mask, LossKnobs(beta=0.0, epsilon_high=0.6, loss_type="bnpo")
    )
    assert loss.item() == pytest.approx((-3.4 + 3.8) / 5, abs=1e-6)
    assert metrics["clip_ratio/high"] == 0.0
    assert metrics["clip_ratio/low"] == pytest.approx(0.2)


def test_k3_kl_adds_beta_times_kl_and_reports_token_mean():
    logps, old, adv, mask = case()
    delta = torch.zeros(2, 3)
    delta[0, 1] = math.log(2.0)
    ref = logps.detach() + delta
    loss, metrics = grpo_loss(logps, old, ref, adv, mask, LossKnobs(beta=0.1))
    k3 = 2 - math.log(2) - 1
    assert loss.item() == pytest.approx((-3.1 / 3 + 3.8 / 2) / 2 + 0.1 * k3 / 3 / 2, abs=1e-6)
    assert metrics["kl"] == pytest.approx(k3 / 5, abs=1e-6)


def test_k3_is_zero_at_equality_and_positive_elsewhere():
    logps = torch.tensor([-1.0, -1.0, -1.0])
    ref = torch.tensor([-1.0, -2.0, 0.0])
    kl = k3_kl(logps, ref)
    assert kl[0] == 0.0
    assert (kl[1:] > 0).all()
    assert float(kl[1]) == pytest.approx(math.exp(-1) + 1 - 1)


def test_float64_inputs_give_float64_loss_with_the_same_value():
    logps, old, adv, mask = case(torch.float64)
    loss, _ = grpo_loss(logps, old, None, adv, mask, LossKnobs(beta=0.0))
    assert loss.dtype == torch.float64
    assert loss.item() == pytest.approx((-3.1 / 3 + 3.8 / 2) / 2, abs=1e-12)


def test_gradients_flow_to_logps_only():
    logps, old, adv, mask = case()
    old.requires_grad_(True)
    ref = (logps.detach() - 0.1).requires_grad_(True)
    adv.requires_grad_(True)
    loss, _ = grpo_loss(logps, old, ref, adv, mask)
    loss.backward()
    assert logps.grad is not None
    assert old.grad is None and ref.grad is None and adv.grad is None


def test_masked_tokens_change_neither_loss_nor_gradient():
    logps, old, adv, mask = case()
    loss, _ = grpo_loss(logps, old, None, adv, mask, LossKnobs(beta=0.0))
    loss.backward()
    assert logps.grad[1, 2] == 0.0
    other = logps.detach().clone()
    other[1, 2] = -50.0
    other.requires_grad_(True)
    loss2, _ = grpo_loss(other, old, None, adv, mask, LossKnobs(beta=0.0))
    assert loss2.item() == loss.item()


def test_fully_masked_sequence_contributes_zero_not_nan():
    logps, old, adv, _ = case()
    mask = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    loss, _ = grpo_loss(logps, old, None, adv, mask, LossKnobs(beta=0.0))
    assert loss.item() == pytest.approx(-3.1 / 3 / 2, abs=1e-6)


@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_gradient_step_moves_sampled_token_logprob_with_the_advantage_sign(advantage):
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 5, requires_grad=True)  # (N, T, V) a free "policy"
    tokens = torch.randint(0, 5, (2, 4))
    mask = torch.ones(2, 4)

    def sampled_logps():
        return torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)

    before = sampled_logps().detach()
    logps = sampled_logps()
    loss, _ = grpo_loss(
        logps, logps.detach(), None, torch.full((2,), advantage), mask, LossKnobs(beta=0.0)
    )
    loss.backward()
    with torch.no_grad():
        logits -= 0.1 * logits.grad
    change = sampled_logps().detach() - before
    assert (change * advantage > 0).all()


def test_ratio_one_gradient_equals_policy_gradient():
    logps, _, adv, mask = case()  # mu = 1: old = logps.detach(), so d loss / d logp = -A / |o|
    loss, _ = grpo_loss(logps, logps.detach(), None, adv, mask, LossKnobs(beta=0.0))
    loss.backward()
    expected = torch.tensor([[-1 / 3] * 3, [2 / 2, 2 / 2, 0.0]]) / 2
    torch.testing.assert_close(logps.grad, expected)


def test_bad_arguments_raise():
    logps, old, adv, mask = case()
    with pytest.raises(ValueError, match="ref_logps"):
        grpo_loss(logps, old, None, adv, mask, LossKnobs(beta=0.04))
    with pytest.raises(ValueError, match="loss_type"):
        aggregate(logps, mask, loss_type="sum", normalizer=1.0)
    with pytest.raises(ValueError, match="loss_type"):
        loss_normalizer(mask, loss_type="sum", max_completion_length=None)


@pytest.mark.parametrize(
    ("loss_type", "expected"), [("grpo", 2.0), ("bnpo", 5.0), ("dapo", 5.0), ("dr_grpo", 20.0)]
)
def test_normalizer_is_the_whole_batch_denominator(loss_type, expected):
    _, _, _, mask = case()  # N=2 sequences, 5 unmasked tokens, max_completion_length 10
    assert loss_normalizer(mask, loss_type=loss_type, max_completion_length=10) == expected


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo", "dr_grpo"])
def test_rows_scored_apart_with_the_whole_normalizer_add_up_to_the_whole(loss_type):
    logps, old, adv, mask = case()
    ref = logps.detach() - 0.3
    knobs = dict(beta=0.1, loss_type=loss_type, max_completion_length=10)
    whole, _ = grpo_loss(logps, old, ref, adv, mask, LossKnobs(**knobs))
    whole.backward()
    expected = logps.grad.clone()
    logps.grad = None
    norm = loss_normalizer(mask, loss_type=loss_type, max_completion_length=10)
    rows = [slice(0, 1), slice(1, 2)]
    pieces = [
        grpo_loss(
            logps[r],
            old[r],
            ref[r],
            adv[r],
            mask[r],
            LossKnobs(**knobs),
            LossExtras(normalizer=norm),
        )[0]
        for r in rows
    ]
    sum(pieces).backward()
    assert sum(p.item() for p in pieces) == pytest.approx(whole.item(), abs=1e-6)
    torch.testing.assert_close(logps.grad, expected)
