"""The micro-batched update equals the full-batch update (grpo/training/update.py).

One rollout of 3 prompts x G 4 = 12 completions from builtin:tiny (most cut at the length
limit, so masking truncated completions changes the loss) is trained once with every
completion in one pass and once 5 at a time: 5 does not divide 12, and the pieces
[0:5], [5:10], [10:12] split groups 1 and 2 between passes. Loss, clip and KL metrics,
the last gradient and the parameters after the optimizer steps must agree to fp32 noise.
"""

import copy
from contextlib import nullcontext
from dataclasses import replace

import pytest
import torch

from grpo.spec import JobSpec, RegexReward
from grpo.training.logprobs import completion_logps
from grpo.training.step_loss import UpdateInputs, loss_mask_of
from grpo.training.trainer import TrainingLoop
from grpo.training.update import policy_update

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ADVANTAGES = torch.tensor([1.2, -0.4, 0.3, -1.1, 0.0, 0.0, 0.0, 0.0, -0.7, 1.5, 0.2, -1.0])
"""Group 1 has no signal: with beta 0 its rows are skipped (groups_with_signal)."""


def spec(**overrides):
    knobs = dict(
        model="builtin:tiny",
        rewards=(RegexReward(pattern=r"\d"),),
        prompts_per_step=3,
        num_generations=4,
        max_completion_length=8,
        temperature=1.5,
        learning_rate=1.0,
        save_steps=0,
    )
    return JobSpec(**{**knobs, **overrides})


def rollout_and_reference(job, workdir, cache_dir):
    """The model, its rollout of 3 prompts (some completions truncated, some not) and the
    log-probs of a perturbed copy as reference; test_distributed_update.py shares it."""
    trainer = TrainingLoop(job, workdir=workdir, cache_dir=cache_dir)
    rollout = trainer.rounds.generate(["1+1=", "23+45=", "7-2="], step=1)
    assert rollout.is_truncated.any() and not rollout.is_truncated.all(), "pick other prompts"
    reference = copy.deepcopy(trainer.model)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.05 * torch.randn_like(p))
        ref_logps = completion_logps(reference, rollout, temperature=1.5)
    return trainer.model, rollout, ref_logps


@pytest.fixture(scope="module")
def setup(tmp_path_factory, grpo_cache_dir):
    return rollout_and_reference(spec(), tmp_path_factory.mktemp("run"), grpo_cache_dir)


def update(setup, job, advantages=ADVANTAGES):
    model, rollout, ref_logps = setup
    model = copy.deepcopy(model)
    # plain SGD: weights move by lr x gradient, so they compare at the gradient's precision
    # (Adam's first step moves a weight whose gradient is fp32 noise by a noisy part of lr)
    optimizer = torch.optim.SGD(model.parameters(), lr=job.learning_rate)
    mask = loss_mask_of(rollout, job)
    result = policy_update(
        model,
        optimizer,
        rollout,
        UpdateInputs(advantages, ref_logps if job.beta > 0 else None, mask, job.beta),
        spec=job,
        autocast=nullcontext,
        step=1,
    )
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    return result, grads, params


CASES = {
    "plain": {},
    "mu3_clipped_kl": dict(num_iterations=3, max_grad_norm=0.05, beta=0.1),
    "masked_truncated": dict(mask_truncated_completions=True, beta=0.1, num_iterations=2),
    "beta0_skips_groups": dict(beta=0.0, num_iterations=2, epsilon_high=0.28),
    "no_clipping": dict(max_grad_norm=None, beta=0.04),
    "entropy_bonus_and_mask": dict(entropy_coef=0.05, top_entropy_quantile=0.5, num_iterations=2),
    "gspo_two_sided": dict(
        importance_sampling_level="sequence", delta=1.5, beta=0.1, num_iterations=2
    ),
}


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo", "dr_grpo", "cispo"])
def test_micro_batches_give_the_full_batch_update(setup, loss_type, case):
    knobs = {**CASES[case], "loss_type": loss_type}
    if loss_type == "cispo":  # its weight cap is epsilon_high itself (MiniMax-M1: about 5)
        knobs["epsilon_high"] = 5.0
        knobs.pop("delta", None)  # delta caps PPO's clipped term, which cispo has not
    whole = update(setup, spec(**knobs))
    pieces = update(setup, spec(micro_batch_size=5, **knobs))
    assert whole[0].metrics.keys() == pieces[0].metrics.keys()
    for key, value in whole[0].metrics.items():
        assert pieces[0].metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert whole[0].metrics["grad_norm"] > 0
    torch.testing.assert_close(pieces[0].logps, whole[0].logps, atol=1e-6, rtol=0)
    torch.testing.assert_close(pieces[1], whole[1], atol=1e-7, rtol=1e-4)
    torch.testing.assert_close(pieces[2], whole[2], atol=1e-6, rtol=1e-5)
    # mu > 1 moves the ratio off 1 after the first step, far enough to reach the clip
    is_clipped = whole[0].metrics["clip_ratio/region"] > 0
    assert is_clipped == (knobs.get("num_iterations", 1) > 1) or loss_type == "cispo"


def test_one_completion_per_pass_gives_the_full_batch_update(setup):
    whole = update(setup, spec(loss_type="dapo", beta=0.1))
    single = update(setup, spec(loss_type="dapo", beta=0.1, micro_batch_size=1))
    assert single[0].metrics["loss"] == pytest.approx(whole[0].metrics["loss"], rel=1e-5)
    torch.testing.assert_close(single[1], whole[1], atol=1e-7, rtol=1e-4)


@pytest.mark.parametrize("micro_batch_size", [None, 5])
@pytest.mark.parametrize(
    "case", ["plain", "beta0_skips_groups", "entropy_bonus_and_mask", "gspo_two_sided", "flat"]
)
def test_a_rollout_without_entropies_gets_them_from_the_update(setup, case, micro_batch_size):
    # vLLM returns no entropies: the update's forward pass (and a no-grad pass over groups
    # it skips, or over all rows for the entropy mask) gives them, equal to the ones our
    # decode loop measured while sampling, and the update is the same as with them
    model, rollout, ref_logps = setup
    knobs = dict(beta=0.0) if case == "flat" else CASES[case]
    job = spec(micro_batch_size=micro_batch_size, **knobs)
    advantages = torch.zeros_like(ADVANTAGES) if case == "flat" else ADVANTAGES
    measured = update(setup, job, advantages)
    blind = update((model, replace(rollout, entropy=None), ref_logps), job, advantages)
    assert rollout.entropy is not None and rollout.entropy.abs().sum() > 0
    torch.testing.assert_close(measured[0].entropy, rollout.entropy)
    torch.testing.assert_close(blind[0].entropy, rollout.entropy, atol=1e-4, rtol=0)  # test_rollout
    assert blind[0].metrics.keys() == measured[0].metrics.keys()
    for key, value in measured[0].metrics.items():
        assert blind[0].metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    torch.testing.assert_close(blind[2], measured[2], atol=1e-6, rtol=1e-5)
