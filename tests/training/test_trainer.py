"""The trainer end to end on the built-in tiny model (grpo/training/trainer.py): the smoke test,
determinism, the step report, the knobs that change the step, and clear errors."""

import json
import math
import resource
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from grpo.checkpoints.files import latest_checkpoint
from grpo.failures import Diverged, OutOfMemory, RewardFunctionError
from grpo.spec import JobSpec, RegexReward
from grpo.spec.optimization import LoraSpec
from grpo.training.logprobs import completion_logps
from grpo.training.step_loss import UpdateInputs
from grpo.training.trainer import FitResult, TrainingLoop
from grpo.training.update import groups_with_signal, policy_update

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SCALAR_KEYS = {
    "reward",
    "reward_std",
    "rewards/regex/mean",
    "rewards/regex/std",
    "kl",
    "beta",
    "loss",
    "entropy",
    "grad_norm",
    "learning_rate",
    "clip_ratio/low",
    "clip_ratio/high",
    "clip_ratio/region",
    "completions/mean_length",
    "completions/min_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "frac_reward_zero_std",
    "groups/all_fail",
    "groups/all_pass",
    "groups/mixed",
    "reward_within_group_var_share",
    "time/generate",
    "time/reward",
    "time/reward/regex",
    "time/reference",
    "time/train",
    "time/step",
    "tokens_per_second",
    "prompts/truncated",
}


def tiny_spec(**overrides):
    """Random tiny model; 'contains a digit' gives mixed groups even on random text."""
    knobs = dict(
        model="builtin:tiny",
        rewards=(RegexReward(pattern=r"\d"),),
        max_steps=2,
        prompts_per_step=2,
        num_generations=4,
        max_completion_length=6,
        learning_rate=1e-3,
        save_steps=0,
        logging={"max_groups_per_step": 1},
    )
    return JobSpec(**{**knobs, **overrides})


def run(spec, tmp_path, cache_dir, **fit_kwargs):
    reports, logs = [], []
    trainer = TrainingLoop(
        spec,
        workdir=tmp_path,
        cache_dir=cache_dir,
        log=lambda level, message: logs.append((level, message)),
    )
    result = trainer.fit(reports.append, **fit_kwargs)
    return result, reports, logs, trainer


def comparable(report):
    return {k: v for k, v in report.scalars.items() if not k.startswith(("time/", "tokens_per"))}


def test_smoke_two_steps_report_everything_and_checkpoint(tmp_path, grpo_cache_dir):
    result, reports, logs, _ = run(tiny_spec(), tmp_path, grpo_cache_dir)
    assert result == FitResult(last_step=2, is_stopped=False)
    assert [r.step for r in reports] == [1, 2] and reports[0].total_steps == 2
    for report in reports:
        assert set(report.scalars) == SCALAR_KEYS
        assert all(math.isfinite(v) for v in report.scalars.values())
        assert len(report.groups) == 2
        assert report.groups[0].completions is not None and report.groups[1].completions is None
        assert sum(report.advantage_histogram) == sum(report.reward_histogram) == 8
        kept = report.groups[0].completions
        assert len(kept) == 4 and all(len(c.token_kls) == c.num_tokens for c in kept)
        assert report.groups[0].prompt_id and report.groups[0].answer
        assert (
            report.scalars["groups/all_fail"]
            + report.scalars["groups/all_pass"]
            + report.scalars["groups/mixed"]
            == 2
        )
    assert any("model loaded" in m for _, m in logs)
    assert any("checkpoint saved at step 2" in m for _, m in logs)
    assert (tmp_path / "checkpoints" / "step-000002" / "model" / "config.json").is_file()


def test_same_spec_and_seed_give_the_same_metrics(tmp_path, grpo_cache_dir):
    _, first, _, _ = run(tiny_spec(), tmp_path / "a", grpo_cache_dir)
    _, second, _, _ = run(tiny_spec(), tmp_path / "b", grpo_cache_dir)
    _, other, _, _ = run(tiny_spec(seed=1), tmp_path / "c", grpo_cache_dir)
    assert [comparable(r) for r in first] == [comparable(r) for r in second]
    assert [g.rewards for g in first[1].groups] == [g.rewards for g in second[1].groups]
    assert [comparable(r) for r in first] != [comparable(r) for r in other]


def test_generation_batch_size_changes_no_sample(tmp_path, grpo_cache_dir):
    """Each group samples from its own stream (seed, step, position), so decoding one group
    at a time samples what decoding all three at once does."""
    spec = tiny_spec(prompts_per_step=3, logging={"max_groups_per_step": 3}, max_steps=1)
    _, whole, _, _ = run(spec, tmp_path / "a", grpo_cache_dir)
    one_group = spec.model_copy(update={"generation_batch_size": spec.num_generations})
    _, pieces, _, _ = run(one_group, tmp_path / "b", grpo_cache_dir)
    texts = [[[c.text for c in g.completions] for g in r.groups] for r in (whole[0], pieces[0])]
    assert texts[0] == texts[1]
    assert len({t for group in texts[0] for t in group}) > 3  # the groups did sample
    assert whole[0].scalars["reward"] == pieces[0].scalars["reward"]


def test_should_stop_is_checked_between_steps_and_checkpoints(tmp_path, grpo_cache_dir):
    asked = []
    result, reports, _, _ = run(
        tiny_spec(max_steps=5),
        tmp_path,
        grpo_cache_dir,
        should_stop=lambda: asked.append(1) or len(asked) > 1,
    )
    assert result == FitResult(last_step=1, is_stopped=True) and len(reports) == 1
    assert (tmp_path / "checkpoints" / "step-000001").is_dir()


def test_reference_sync_every_step_keeps_pre_update_kl_at_zero(tmp_path, grpo_cache_dir):
    _, synced, _, _ = run(
        tiny_spec(
            max_steps=3, sync_ref_model=True, ref_model_sync_steps=1, ref_model_mixup_alpha=1.0
        ),
        tmp_path / "a",
        grpo_cache_dir,
    )
    _, fixed, _, _ = run(tiny_spec(max_steps=3), tmp_path / "b", grpo_cache_dir)
    assert synced[2].scalars["kl"] == 0.0
    assert fixed[2].scalars["kl"] > 0.0


def test_adaptive_kl_moves_beta_toward_the_target(tmp_path, grpo_cache_dir):
    _, reports, _, _ = run(
        tiny_spec(max_steps=3, kl_target=10.0, kl_horizon=2), tmp_path, grpo_cache_dir
    )
    betas = [r.scalars["beta"] for r in reports]  # KL far below target: beta shrinks by 10% a step
    assert betas[0] == 0.04
    assert betas[1] == pytest.approx(0.04 * 0.9) and betas[2] == pytest.approx(0.04 * 0.81)


def test_beta_zero_skips_the_reference(tmp_path, grpo_cache_dir):
    _, reports, _, trainer = run(tiny_spec(beta=0.0), tmp_path, grpo_cache_dir)
    assert trainer.reference is None
    assert reports[1].scalars["kl"] == 0.0 and reports[1].scalars["time/reference"] < 1e-3


def test_multiple_iterations_clip_against_the_sampling_policy(tmp_path, grpo_cache_dir):
    _, reports, _, _ = run(
        tiny_spec(num_iterations=3, learning_rate=3e-2, max_steps=1), tmp_path, grpo_cache_dir
    )
    assert reports[0].scalars["clip_ratio/region"] > 0.0


def test_gradient_checkpointing_gives_the_same_step(tmp_path, grpo_cache_dir):
    # fp32: on a CPU with native bf16, `auto` autocasts and recomputation differs by ~5e-4
    _, plain, _, _ = run(tiny_spec(max_steps=1, precision="fp32"), tmp_path / "a", grpo_cache_dir)
    _, checkpointed, _, _ = run(
        tiny_spec(max_steps=1, precision="fp32", gradient_checkpointing=True),
        tmp_path / "b",
        grpo_cache_dir,
    )
    for key in ("loss", "grad_norm", "entropy", "kl", "reward"):
        assert checkpointed[0].scalars[key] == pytest.approx(
            plain[0].scalars[key], rel=1e-4, abs=1e-7
        )


def test_lora_trains_adapters_only_and_uses_the_base_as_reference(tmp_path, grpo_cache_dir):
    spec = tiny_spec(
        max_steps=2, learning_rate=1e-2, lora=LoraSpec(r=4, target_modules=("q_proj", "v_proj"))
    )
    trainer = TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir)
    base = {
        n: p.detach().clone() for n, p in trainer.model.named_parameters() if not p.requires_grad
    }
    reports = []
    trainer.fit(reports.append)
    assert all(torch.equal(p, base[n]) for n, p in trainer.model.named_parameters() if n in base)
    assert reports[1].scalars["kl"] > 0.0
    assert (tmp_path / "checkpoints" / "step-000002" / "model" / "adapter_config.json").is_file()


def test_a_diverging_learning_rate_stops_with_the_step(tmp_path, grpo_cache_dir):
    # lr 1 without clipping: the second pass over the batch puts ref - logp past exp's range
    spec = tiny_spec(learning_rate=1.0, max_grad_norm=None, num_iterations=4, beta=0.04)
    with pytest.raises(Diverged, match=r"loss is (NaN|infinite) at step 1"):
        run(spec, tmp_path, grpo_cache_dir)


def test_a_reward_that_raises_names_the_function_the_step_and_the_prompt(tmp_path, grpo_cache_dir):
    data = tmp_path / "data.jsonl"
    records = [{"id": "ok", "prompt": "1+1=", "answer": "2"}, {"id": "bad", "prompt": "2+2="}]
    data.write_text("".join(json.dumps({"answer": None, **r}) + "\n" for r in records))
    spec = tiny_spec(data={"source": str(data)}, rewards=({"name": "accuracy"},))
    with pytest.raises(
        RewardFunctionError,
        match=r"reward function 'accuracy' failed at step 1 on prompt 'bad': ValueError: the "
        "reference answer is empty",
    ):
        run(spec, tmp_path, grpo_cache_dir)


def test_running_out_of_memory_names_the_step_and_the_knobs(tmp_path, grpo_cache_dir):
    # 32768 sequences x 131072 cached positions: a 1 TiB KV buffer. An address-space limit
    # 16 GiB above what the process maps makes the refusal certain, whatever the kernel's
    # overcommit policy.
    spec = tiny_spec(prompts_per_step=64, num_generations=512, max_completion_length=131072)
    mapped = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmSize:")
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped + 16 * 2**30, hard))
    try:
        with pytest.raises(
            OutOfMemory,
            match=r"out of memory on cpu at step 1 \(tried to allocate [\d.]+ GiB\): set "
            r"micro_batch_size \(unset: all 32768 completions per pass; try 16384\) and "
            r"generation_batch_size .*, or lower num_generations \(512\), prompts_per_step "
            r"\(64\) or max_completion_length",
        ):
            run(spec, tmp_path, grpo_cache_dir)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_empty_dataset_raises_value_error(tmp_path, grpo_cache_dir):
    data = tmp_path / "empty.jsonl"
    data.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        TrainingLoop(
            tiny_spec(data={"source": str(data)}), workdir=tmp_path, cache_dir=grpo_cache_dir
        )


def test_skipping_all_equal_groups_changes_the_cost_not_the_update(tmp_path, grpo_cache_dir):
    """beta = 0: groups with all-equal rewards have advantage 0 and are left out of the
    forward/backward. A vanishing KL term (its gradient is 0 where ref = logp) forces the
    full pass over every row; both must give the same gradient."""
    spec = tiny_spec(beta=0.0, prompts_per_step=4)
    advantages = torch.tensor([1.0, -1.0, 1.0, -1.0] + [0.0] * 12)  # only group 0 is mixed
    assert groups_with_signal(advantages, 4).tolist() == [0]
    grads = []
    for beta in (0.0, 1e-30):
        trainer = TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir)
        rollout = trainer.rounds.generate(["1+1=", "2+2=", "3+3=", "4+4="], step=1)
        with torch.no_grad():
            ref = completion_logps(trainer.model, rollout) if beta else None
        policy_update(
            trainer.model,
            trainer.optimizer,
            rollout,
            UpdateInputs(advantages, ref, rollout.completion_mask, beta),
            spec=spec,
            autocast=nullcontext,
            step=1,
        )
        grads.append(torch.cat([p.grad.flatten() for p in trainer.model.parameters()]))
    assert grads[0].abs().max() > 0
    torch.testing.assert_close(grads[0], grads[1], atol=1e-7, rtol=1e-5)


def test_masking_truncated_completions_removes_them_from_the_loss(tmp_path, grpo_cache_dir):
    spec = tiny_spec(max_steps=1, max_completion_length=1, mask_truncated_completions=True)
    _, reports, _, _ = run(spec, tmp_path, grpo_cache_dir)
    scalars = reports[0].scalars
    # Seeded: with one token allowed, every completion of this run is cut off (none says EOS).
    assert scalars["completions/clipped_ratio"] == 1.0, "setup changed: pick another seed"
    assert scalars["loss"] == 0.0 and scalars["grad_norm"] == 0.0


@pytest.mark.parametrize("knobs", [{"precision": "bf16"}, {"optim": "adafactor"}], ids=str)
def test_other_precisions_and_optimizers_train(tmp_path, grpo_cache_dir, knobs):
    _, reports, _, _ = run(tiny_spec(max_steps=1, **knobs), tmp_path, grpo_cache_dir)
    assert all(math.isfinite(v) for v in reports[0].scalars.values())
    assert reports[0].scalars["grad_norm"] > 0


def test_builtin_small_trains_on_chat_prompts_cut_to_fit_with_their_template(
    tmp_path, grpo_cache_dir
):
    system = {"role": "system", "content": "Answer with one number."}
    records = [
        {"prompt": [system, {"role": "user", "content": "word " * 80 + "2+2?"}], "answer": "4"},
        {"prompt": [system, {"role": "user", "content": "3+3?"}], "answer": "6"},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    spec = tiny_spec(
        model="builtin:small",
        data={"source": str(path)},
        max_prompt_length=40,
        max_steps=1,
        num_generations=2,
        max_completion_length=4,
        logging={"max_groups_per_step": 2},
    )
    _, (report,), _, trainer = run(spec, tmp_path / "run", grpo_cache_dir)
    assert report.scalars["prompts/truncated"] == 1
    # the checkpoint's tokenizer is the model's own: no padding side leaked from training
    saved = AutoTokenizer.from_pretrained(latest_checkpoint(tmp_path / "run") / "model")
    assert saved.padding_side == trainer.tokenizer.padding_side == "right"
    for group in report.groups:
        assert group.prompt.startswith("<|im_start|>system\nAnswer with one number.<|im_end|>\n")
        assert group.prompt.endswith("?<|im_end|>\n<|im_start|>assistant\n")
