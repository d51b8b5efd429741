"""`grpo convert` (grpo/spec/trl_config.py): TRL GRPOConfig YAMLs become JobSpecs; the batch
arithmetic; every field left out is listed with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from grpo.cli.main import main
from grpo.spec import JobSpec
from grpo.spec.trl_config import convert, prompts_per_step

RECIPES = Path(__file__).parents[1] / "data" / "trl_recipes"


@pytest.mark.parametrize(
    ("per_device", "accumulation", "processes", "generations", "prompts"),
    [
        (16, 4, 1, 16, 4),  # open-r1 on one GPU: 64 completions, 4 groups of 16
        (16, 4, 8, 16, 32),  # the same on 8 GPUs
        (4, 8, 1, 8, 4),
        (8, 2, 4, 4, 16),
        (2, 1, 3, 6, 1),  # 6 completions over 3 devices: one group
    ],
)
def test_prompts_per_step_is_completions_per_optimizer_step_over_the_group_size(
    per_device: int, accumulation: int, processes: int, generations: int, prompts: int
) -> None:
    assert prompts_per_step(
        per_device_train_batch_size=per_device, gradient_accumulation_steps=accumulation,
        processes=processes, num_generations=generations,
    ) == prompts  # fmt: skip


def test_a_step_that_splits_a_group_is_listed_not_guessed() -> None:
    with pytest.raises(ValueError, match="24 completions is not a multiple of num_generations 16"):
        prompts_per_step(
            per_device_train_batch_size=12, gradient_accumulation_steps=2, processes=1,
            num_generations=16,
        )  # fmt: skip
    out = convert({"per_device_train_batch_size": 12, "gradient_accumulation_steps": 2,
                   "num_generations": 16})  # fmt: skip
    assert "not a multiple" in out.unmapped["per_device_train_batch_size"]
    assert "prompts_per_step" not in out.spec


def test_the_open_r1_recipe_maps_its_knobs_and_lists_the_rest() -> None:
    config = yaml.safe_load((RECIPES / "open_r1_math.yaml").read_text())
    out = convert(config)
    spec = JobSpec.model_validate(out.spec)
    assert (spec.prompts_per_step, spec.num_generations, spec.micro_batch_size) == (4, 16, 16)
    assert (spec.model, spec.precision, spec.lr_scheduler_type) == (
        "Qwen/Qwen2.5-1.5B-Instruct", "bf16", "cosine",
    )  # fmt: skip
    assert spec.warmup_steps == 10  # warmup_ratio 0.1 of max_steps 100
    assert (spec.data.source, spec.data.prompt_field, spec.data.answer_field) == (
        "hf:open-r1/OpenR1-Math-220k", "problem", "solution",
    )  # fmt: skip
    assert spec.data.system_prompt and spec.data.system_prompt.startswith("You are a helpful")
    assert [r.name for r in spec.rewards] == ["accuracy", "format"]
    assert spec.logging.report_to == ("wandb",)
    assert set(out.unmapped) == {
        "attn_implementation", "do_eval", "gradient_checkpointing_kwargs", "hub_model_id",
        "hub_strategy", "log_completions", "log_level", "logging_first_step", "logging_steps",
        "logging_strategy", "model_revision", "num_train_epochs", "output_dir",
        "overwrite_output_dir", "per_device_eval_batch_size", "push_to_hub", "save_strategy",
        "save_total_limit", "torch_dtype",
    }  # fmt: skip
    assert spec.use_vllm  # the recipe's own engine: vLLM, colocated


def test_vllm_knobs_and_server_mode_keep_their_names() -> None:
    out = convert({
        "use_vllm": True, "vllm_mode": "server", "vllm_server_host": "10.0.0.2",
        "vllm_server_port": 8001, "vllm_server_timeout": 60, "vllm_group_port": 51216,
        "vllm_gpu_memory_utilization": 0.5, "vllm_importance_sampling_mode": "token_truncate",
        "vllm_importance_sampling_clip_max": 2.0,
    })  # fmt: skip
    spec = JobSpec.model_validate(out.spec)
    assert spec.use_vllm and spec.vllm_gpu_memory_utilization == 0.5
    assert spec.importance_correction.mode == "token_truncate"
    assert spec.importance_correction.clip_max == 2.0
    assert spec.vllm_mode == "server" and spec.vllm_server_url == "http://10.0.0.2:8001"
    assert spec.vllm_server_timeout == 60
    assert set(out.unmapped) == {"vllm_group_port"}  # no NCCL group: a file in /dev/shm


def test_values_we_do_not_offer_are_listed_with_pydantics_reason() -> None:
    out = convert({"loss_type": "sapo", "lr_scheduler_type": "constant_with_warmup", "beta": 0})
    assert out.spec["lr_scheduler_type"] == "constant"  # ours warm up under every schedule
    assert "'sapo' refused" in out.unmapped["loss_type"]
    assert out.spec["beta"] == 0 and "loss_type" not in out.spec


def test_lora_processes_and_python_rewards_of_a_multi_gpu_recipe() -> None:
    out = convert(yaml.safe_load((RECIPES / "lora_gsm8k.yaml").read_text()))
    spec = JobSpec.model_validate(out.spec)
    assert (spec.prompts_per_step, spec.resources.num_processes) == (16, 4)  # 8·2·4 / 4
    assert spec.lora is not None and (spec.lora.r, spec.lora.alpha) == (16, 32)
    assert spec.data.subset == "main" and spec.data.answer_field is None
    assert [(r.name, r.weight) for r in spec.rewards] == [("format", 0.5), ("python", 1.0)]
    assert out.unmapped == {"report_to": "only tensorboard, mlflow and wandb are trackers here"}


def test_grpo_convert_writes_the_spec_yaml_with_the_unmapped_fields_on_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "spec.yaml"
    assert main(["convert", str(RECIPES / "trl_docs_dapo.yaml"), "-o", str(target)]) == 0
    text = target.read_text()
    assert "#   steps_per_generation: one generation per optimizer step" in text
    spec = JobSpec.model_validate(yaml.safe_load(text))
    assert (spec.loss_type, spec.epsilon_high, spec.scale_rewards, spec.prompts_per_step) == (
        "dapo", 0.28, "none", 4,
    )  # fmt: skip
    assert main(["convert", str(RECIPES / "lora_gsm8k.yaml"), "--processes", "2"]) == 0
    assert "num_processes: 4" in capsys.readouterr().out  # the file's own count wins


@pytest.mark.parametrize(
    "config",
    [
        {"num_generations": 0},
        {"per_device_train_batch_size": "16"},
        {"max_steps": "many"},
        {"warmup_ratio": "x", "max_steps": 10},
        {"reward_funcs": ["accuracy"], "reward_weights": 3},
        {"num_processes": "four"},
    ],
)
def test_values_of_the_wrong_type_are_a_value_error_never_a_crash(
    config: dict[str, object],
) -> None:
    try:
        out = convert(config)
    except ValueError:
        return
    JobSpec.model_validate(out.spec)  # or they are listed as unmapped
    assert out.unmapped


def test_the_spec_is_the_validated_specs_json_whatever_the_yaml_held() -> None:
    out = convert(yaml.safe_load("1: 2\nseed: 7\nrun_name: 2020-01-01\nbeta: 0\n"))
    assert out.spec == {"name": "2020-01-01", "beta": 0.0, "seed": 7, "prompts_per_step": 1,
                        "micro_batch_size": 8}  # fmt: skip
    assert out.unmapped == {"1": "no equivalent in JobSpec"}


def test_a_server_mode_recipe_keeps_trls_server_fields_and_its_base_url_wins() -> None:
    out = convert(yaml.safe_load((RECIPES / "vllm_server_grpo.yaml").read_text()))
    spec = JobSpec.model_validate(out.spec)
    assert (spec.use_vllm, spec.vllm_mode, spec.vllm_server_timeout) == (True, "server", 300.0)
    assert spec.vllm_server_url == "http://10.0.0.5:8000"  # over host and port, as in TRL
    assert (spec.vllm_server_host, spec.vllm_server_port) == ("10.0.0.9", 8011)
    assert not spec.async_generation  # a GRPOConfig: generation and training take turns
    assert set(out.unmapped) == {"output_dir", "vllm_group_port"}


def test_an_async_grpo_config_recipe_becomes_async_generation_on_its_vllm_server() -> None:
    out = convert(yaml.safe_load((RECIPES / "async_grpo_gsm8k.yaml").read_text()))
    spec = JobSpec.model_validate(out.spec)
    assert (spec.async_generation, spec.max_staleness, spec.weight_sync_steps) == (True, 2, 2)
    assert (spec.use_vllm, spec.vllm_mode) == (True, "server")
    assert spec.vllm_server_url == "http://127.0.0.1:8001" and spec.vllm_server_timeout == 600
    assert (spec.prompts_per_step, spec.micro_batch_size) == (4, 16)  # 16 · 2 / 8
    assert (spec.epsilon_high, spec.precision, spec.data.subset) == (0.28, "bf16", "main")
    # max_inflight_tasks -1 (TRL's automatic value) is what our producer does: not listed
    assert set(out.unmapped) == {
        "request_timeout", "queue_maxsize", "heartbeat_stale_after_s", "token_budget",
        "chat_template_kwargs", "output_dir", "save_strategy", "logging_steps",
        "log_completions", "report_to",
    }  # fmt: skip
    assert "max_staleness + 1" in out.unmapped["queue_maxsize"]
    assert "vllm_server_timeout" in out.unmapped["request_timeout"]


def test_an_async_recipe_without_a_field_of_its_own_is_told_by_the_caller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = {"model_name_or_path": "Qwen/Qwen3-0.6B", "max_steps": 200, "learning_rate": 1e-5}
    assert "async_generation" not in convert(recipe).spec  # a GRPOConfig, for all it says
    spec = JobSpec.model_validate(convert(recipe, is_async=True).spec)
    assert spec.async_generation and (spec.max_staleness, spec.weight_sync_steps) == (4, 1)
    assert spec.vllm_server_url == "http://localhost:8000"  # AsyncGRPOConfig's default
    path = tmp_path / "async.yaml"
    path.write_text(yaml.safe_dump(recipe))
    assert main(["convert", str(path), "--async"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# JobSpec converted from a TRL AsyncGRPOConfig")
    assert "async_generation: true" in text


def test_async_fields_we_do_not_offer_are_listed_with_the_reason() -> None:
    out = convert({
        "max_staleness": 0, "weight_sync_steps": 3, "max_inflight_tasks": 64,
        "delta_sync_enabled": True, "delta_sync_repo_id": "me/run", "vllm_mode": "colocate",
        "max_tool_calling_iterations": 4,
    })  # fmt: skip
    spec = JobSpec.model_validate(out.spec)
    assert spec.async_generation and spec.vllm_mode == "server"
    # 0 is under weight_sync_steps - 1 = 2: listed with the spec's reason, our default kept
    assert out.unmapped["max_staleness"].startswith("0 refused: must be at least")
    assert (spec.max_staleness, spec.weight_sync_steps) == (4, 3)
    assert "at most max_staleness ahead" in out.unmapped["max_inflight_tasks"]
    assert "pushed whole" in out.unmapped["delta_sync_enabled"]
    assert "vLLM server only" in out.unmapped["vllm_mode"]
    assert "refuses tools" in out.unmapped["max_tool_calling_iterations"]
