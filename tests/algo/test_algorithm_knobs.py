"""The issue-15 knobs reach the step (grpo/training/trainer.py, grpo/training/update.py): each
one trains the tiny model for two steps with finite metrics and changes what it should."""

import math
from contextlib import nullcontext

import pytest
import torch

from grpo.algo.advantages import decoupled_advantages
from grpo.spec import FormatReward, RegexReward
from grpo.spec.logging import LoggingSpec
from grpo.training.step_loss import UpdateInputs
from grpo.training.trainer import TrainingLoop
from grpo.training.update import policy_update
from tests.training.test_trainer import comparable, run, tiny_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize(
    "knobs",
    [
        {"importance_sampling_level": "sequence", "num_iterations": 2, "delta": 1.5},
        {"loss_type": "cispo", "epsilon_high": 5.0, "num_iterations": 2},
        {"top_entropy_quantile": 0.2, "entropy_coef": 0.01, "beta": 0.0},
        {"min_p": 0.05, "repetition_penalty": 1.3, "stop": ["1", "+"]},
        {"sync_ref_model": True, "ref_model_sync_steps": 1, "ref_model_mixup_alpha": 0.5},
    ],
    ids=["gspo-delta", "cispo", "entropy", "sampling", "soft-ref"],
)
def test_each_knob_trains_with_finite_metrics_and_changes_the_run(tmp_path, grpo_cache_dir, knobs):
    _, reports, _, _ = run(tiny_spec(**knobs), tmp_path / "knob", grpo_cache_dir)
    _, plain, _, _ = run(
        tiny_spec(beta=knobs.get("beta", 0.04)), tmp_path / "plain", grpo_cache_dir
    )
    assert all(math.isfinite(v) for r in reports for v in r.scalars.values())
    assert [comparable(r) for r in reports] != [comparable(r) for r in plain]


def test_entropy_quantile_reports_the_masked_share(tmp_path, grpo_cache_dir):
    _, reports, _, _ = run(tiny_spec(top_entropy_quantile=0.2), tmp_path, grpo_cache_dir)
    # 20% of the step's tokens stay (ties at the threshold may keep a few more)
    assert 0.5 < reports[0].scalars["entropy_masked_share"] <= 0.8


def test_normalize_then_sum_uses_each_function_within_its_group(tmp_path, grpo_cache_dir):
    rewards = (RegexReward(pattern=r"\d"), FormatReward(pattern=r".*[a-m].*", weight=0.5))
    spec = tiny_spec(rewards=rewards, multi_objective_aggregation="normalize_then_sum")
    _, reports, _, _ = run(
        spec.model_copy(update={"logging": LoggingSpec(max_groups_per_step=2)}),
        tmp_path,
        grpo_cache_dir,
    )
    groups = reports[0].groups
    table = torch.tensor(
        [[[c.rewards["regex"], c.rewards["format"]] for c in g.completions] for g in groups],
        dtype=torch.float64,
    )
    expected = decoupled_advantages(table, torch.tensor([1.0, 0.5]), eps=spec.advantage_eps)
    torch.testing.assert_close(
        torch.tensor([g.advantages for g in groups], dtype=torch.float64),
        expected,
        atol=1e-5,
        rtol=0,
    )


def test_gspo_with_dapo_is_noted_in_the_run_log(tmp_path, grpo_cache_dir):
    spec = tiny_spec(importance_sampling_level="sequence", loss_type="dapo", max_steps=1)
    _, _, logs, _ = run(spec, tmp_path, grpo_cache_dir)
    assert any(level == "warning" and "GSPO intends grpo" in m for level, m in logs)


def test_the_entropy_bonus_trains_on_flat_groups_too(tmp_path, grpo_cache_dir):
    # beta 0 and every advantage 0 would skip the whole update; an entropy bonus still has
    # a gradient on every token, so no group may be skipped
    spec = tiny_spec(beta=0.0, entropy_coef=0.1)
    trainer = TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir)
    rollout = trainer.rounds.generate(["1+1=", "2+2="], step=1)
    result = policy_update(
        trainer.model,
        trainer.optimizer,
        rollout,
        UpdateInputs(torch.zeros(8), None, rollout.completion_mask, 0.0),
        spec=spec,
        autocast=nullcontext,
        step=1,
    )
    assert result.metrics["grad_norm"] > 0
