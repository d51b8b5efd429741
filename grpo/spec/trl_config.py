"""A TRL `GRPOConfig` YAML (and the script arguments public recipes put beside it) as the
equivalent JobSpec, with every field that could not be mapped and why.

Batch sizes: TRL counts completions per device per micro-step; one optimizer step consumes
per_device_train_batch_size × gradient_accumulation_steps × processes completions, i.e.
that / num_generations prompts: our `prompts_per_step`. A knob with the same name and the
same meaning keeps its value; pydantic then checks each as JobSpec does, and a value it
refuses is listed with pydantic's reason. Pure functions of plain dicts; imports neither
torch nor the server: `grpo convert`, `POST /api/specs/convert` and the new-run page share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml
from pydantic import ValidationError

from grpo.spec import JobSpec
from grpo.spec.correction import TRL_NAMES as CORRECTION_NAMES
from grpo.spec.hints import worded_errors
from grpo.spec.trl_async import is_async_recipe, map_async

SAME_NAME = (
    "num_generations num_iterations beta epsilon epsilon_high delta loss_type "
    "importance_sampling_level top_entropy_quantile mask_truncated_completions "
    "max_prompt_length max_completion_length temperature top_p top_k min_p "
    "repetition_penalty learning_rate lr_scheduler_type warmup_steps weight_decay "
    "adam_epsilon max_grad_norm optim gradient_checkpointing seed save_steps max_steps "
    "sync_ref_model ref_model_sync_steps ref_model_mixup_alpha multi_objective_aggregation "
    "use_vllm vllm_mode vllm_gpu_memory_utilization vllm_enable_sleep_mode "
    "vllm_max_model_length vllm_server_base_url vllm_server_host vllm_server_port "
    "vllm_server_timeout"
).split()
"""GRPOConfig fields whose JobSpec field has the same name and meaning. TRL's
vllm_importance_sampling_* knobs become the importance_correction section
(grpo/spec/correction.py's TRL_NAMES)."""
BUILTIN_REWARDS = {"accuracy": "accuracy", "accuracy_reward": "accuracy", "format": "format"}
"""Reward names of public recipes that a built-in rule computes; others become `python`
entries naming an installed function of the same name."""
ANSWER_COLUMN = "solution"
"""The reference-answer column of open-r1's and TRL's math recipes."""
WHY_NOT: dict[str, str] = {
    "per_device_eval_batch_size": "held-out evaluation is configured in `eval`",
    "eval_strategy": "held-out evaluation is configured in `eval` (eval.every_steps)",
    "eval_steps": "held-out evaluation is configured in `eval` (eval.every_steps)",
    "do_eval": "held-out evaluation is configured in `eval`",
    "logging_steps": "every step is logged",
    "logging_strategy": "every step is logged",
    "log_completions": "every step keeps its groups (logging.max_groups_per_step)",
    "num_completions_to_print": "the group inspector shows completions",
    "output_dir": "the service keeps each run's files in its own workdir (used as the name)",
    "overwrite_output_dir": "the service keeps each run's files in its own workdir",
    "push_to_hub": "export the trained model from the run page or `grpo export`",
    "hub_model_id": "export the trained model from the run page or `grpo export`",
    "hub_strategy": "export the trained model from the run page or `grpo export`",
    "save_strategy": "checkpoints every save_steps (0: only the final one)",
    "save_total_limit": "the service keeps its own checkpoints",
    "vllm_group_port": "server mode pushes weights through a file in /dev/shm, no NCCL group",
    "vllm_tensor_parallel_size": "one engine per rank, each on its rank's device",
    "steps_per_generation": "one generation per optimizer step; num_iterations reuses it",
    "generation_batch_size": "not the same concept: ours bounds completions decoded at once",
    "num_train_epochs": "training length is max_steps (epochs depend on the dataset size)",
    "torch_dtype": "precision is `precision` (auto, fp32, bf16)",
    "attn_implementation": "the model's default attention is used",
    "model_revision": "the model is named by id or path only",
    "trust_remote_code": "remote code is never run",
    "report_to": "only tensorboard, mlflow and wandb are trackers here",
    "dataset_test_split": "held-out evaluation is configured in `eval` (eval.split)",
    "ddp_find_unused_parameters": "ranks are launched by the service",
    "bf16": "precision is `precision` (auto, fp32, bf16)",
    "fp16": "fp16 training is not offered; precision auto uses bf16 where the hardware has it",
    "chat_template_kwargs": "the model's chat template is applied with its defaults",
    "router_aux_loss_coef": "a mixture-of-experts load-balancing loss is not offered",
    "model_init_kwargs": "the model is loaded from `model` and `precision` alone",
}
"""Why a GRPOConfig field has no JobSpec equivalent (others: "no equivalent in JobSpec")."""
TRACKERS = ("tensorboard", "mlflow", "wandb")
SCRIPT_DATA_FIELDS = (
    ("dataset_config", "subset"),
    ("dataset_train_split", "split"),
    ("dataset_prompt_column", "prompt_field"),
    ("system_prompt", "system_prompt"),
)
"""Script arguments of public recipes and the `data` fields they become."""
SCHEDULERS = {"constant_with_warmup": "constant", "cosine_with_min_lr": None}
"""TRL (transformers) scheduler names we offer under another name (ours warm up first
whatever the schedule); None: not offered."""


@dataclass
class Conversion:
    """The JobSpec (as a dict that validates) and every input field it leaves out."""

    spec: dict[str, Any] = field(default_factory=dict)
    unmapped: dict[str, str] = field(default_factory=dict)
    """Input field -> why it was not mapped."""


def prompts_per_step(
    *, per_device_train_batch_size: int, gradient_accumulation_steps: int, processes: int,
    num_generations: int,
) -> int:  # fmt: skip
    """TRL's completions per optimizer step over num_generations; ValueError when the step
    does not hold whole groups (TRL refuses such a config too)."""
    counts = (per_device_train_batch_size, gradient_accumulation_steps, processes, num_generations)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts):
        raise ValueError(
            "per_device_train_batch_size, gradient_accumulation_steps, processes and "
            f"num_generations must be whole numbers of at least 1, got {counts}"
        )
    completions = per_device_train_batch_size * gradient_accumulation_steps * processes
    if completions % num_generations:
        raise ValueError(
            f"per_device_train_batch_size × gradient_accumulation_steps × processes = "
            f"{completions} completions is not a multiple of num_generations {num_generations}"
        )
    return completions // num_generations


def convert(
    config: dict[str, Any], *, processes: int = 1, name: str = "", is_async: bool | None = None
) -> Conversion:
    """The JobSpec of a GRPOConfig (plus script arguments) run on `processes` devices;
    ValueError, saying what is wrong, for a config whose values have the wrong types.
    `is_async`: the config is TRL's AsyncGRPOConfig (grpo/spec/trl_async.py); None: when it
    sets one of that class's own fields."""
    if is_async is None:
        is_async = is_async_recipe(config)
    try:
        return _convert(config, processes=processes, name=name, is_async=is_async)
    except (TypeError, ArithmeticError, AttributeError) as exc:
        raise ValueError(f"a value of the config has the wrong type: {exc}") from exc


def _convert(config: dict[str, Any], *, processes: int, name: str, is_async: bool) -> Conversion:
    out = Conversion()
    rest = {str(key): value for key, value in config.items()}
    processes = int(rest.pop("num_processes", processes))
    out.spec["name"] = _name(rest, name)
    _same_names(rest, out)
    if is_async:
        map_async(rest, out.spec, out.unmapped)
    _batch(rest, out, processes)
    _precision(rest, out)
    _schedule(rest, out)
    _script_arguments(rest, out)
    _lora(rest, out)
    _trackers(rest, out)
    for key in rest:
        out.unmapped[key] = WHY_NOT.get(key, "no equivalent in JobSpec")
    _drop_refused(out)
    return out


def _name(rest: dict[str, Any], given: str) -> str:
    run_name = rest.pop("run_name", None)
    output_dir = rest.get("output_dir")
    text = given or run_name or (PurePosixPath(str(output_dir)).name if output_dir else "")
    return str(text or "trl-recipe")[:200]


def _same_names(rest: dict[str, Any], out: Conversion) -> None:
    for key in SAME_NAME:
        if key in rest and rest[key] is not None:
            out.spec[key] = rest.pop(key)
    correction = {ours: rest.pop(key) for key, ours in CORRECTION_NAMES.items()
                  if key in rest and rest[key] is not None}  # fmt: skip
    if correction:
        out.spec["importance_correction"] = correction
    if out.spec.get("max_steps", 1) <= 0:  # TRL's -1: run num_train_epochs instead
        out.unmapped["max_steps"] = "TRL's -1 (epochs) has no equivalent: set max_steps"
        del out.spec["max_steps"]
    if (
        out.spec.get("lr_scheduler_type") in SCHEDULERS
        and SCHEDULERS[out.spec["lr_scheduler_type"]]
    ):
        out.spec["lr_scheduler_type"] = SCHEDULERS[out.spec["lr_scheduler_type"]]
    if "scale_rewards" in rest:
        value = rest.pop("scale_rewards")
        out.spec["scale_rewards"] = {True: "group", False: "none"}.get(value, value)


def _batch(rest: dict[str, Any], out: Conversion, processes: int) -> None:
    per_device = rest.pop("per_device_train_batch_size", 8)  # TRL's defaults
    accumulation = rest.pop("gradient_accumulation_steps", 1)
    generations = out.spec.get("num_generations", 8)
    try:
        out.spec["prompts_per_step"] = prompts_per_step(
            per_device_train_batch_size=per_device, gradient_accumulation_steps=accumulation,
            processes=processes, num_generations=generations,
        )  # fmt: skip
    except (ValueError, TypeError) as exc:
        out.unmapped["per_device_train_batch_size"] = str(exc)
        return
    out.spec["micro_batch_size"] = per_device  # completions per forward/backward pass
    if processes > 1:
        out.spec["resources"] = {"num_processes": processes}


def _precision(rest: dict[str, Any], out: Conversion) -> None:
    if rest.get("bf16") is True:
        del rest["bf16"]
        out.spec["precision"] = "bf16"
    elif rest.get("bf16") is False and not rest.get("fp16"):
        del rest["bf16"]
        out.spec["precision"] = "fp32"


def _schedule(rest: dict[str, Any], out: Conversion) -> None:
    ratio = rest.pop("warmup_ratio", None)
    if ratio and "warmup_steps" not in out.spec:
        if "max_steps" in out.spec:
            out.spec["warmup_steps"] = math.ceil(ratio * out.spec["max_steps"])
        else:
            out.unmapped["warmup_ratio"] = "needs max_steps to become warmup_steps"


def _script_arguments(rest: dict[str, Any], out: Conversion) -> None:
    if "model_name_or_path" in rest:
        out.spec["model"] = rest.pop("model_name_or_path")
    data: dict[str, Any] = {}
    if dataset := rest.pop("dataset_name", None):
        data["source"] = (
            dataset
            if str(dataset).startswith(("hf:", "dataset:", "file:", "/", "."))
            else f"hf:{dataset}"
        )
    for ours_from, ours in SCRIPT_DATA_FIELDS:
        if rest.get(ours_from) is not None:
            data[ours] = rest.pop(ours_from)
    names = rest.pop("reward_funcs", None)
    weights = rest.pop("reward_weights", None)
    if names:
        out.spec["rewards"] = _rewards(list(names), weights, out)
        needs_answer = any(r["name"] == "accuracy" for r in out.spec["rewards"])
        data["answer_field"] = ANSWER_COLUMN if needs_answer else None
    if data:
        out.spec["data"] = data


def _rewards(
    names: list[str], weights: list[float] | None, out: Conversion
) -> list[dict[str, Any]]:
    if weights is not None and len(weights) != len(names):
        out.unmapped["reward_weights"] = f"{len(weights)} weights for {len(names)} reward_funcs"
        weights = None
    entries = []
    for i, name in enumerate(names):
        builtin = BUILTIN_REWARDS.get(name)
        entry: dict[str, Any] = (
            {"name": builtin} if builtin else {"name": "python", "function": name}
        )
        entry["label"] = name
        if weights is not None:
            entry["weight"] = weights[i]
        entries.append(entry)
    return entries


def _lora(rest: dict[str, Any], out: Conversion) -> None:
    if not rest.pop("use_peft", False):
        return
    lora = {ours: rest.pop(f"lora_{ours}") for ours in ("r", "alpha", "dropout", "target_modules")
            if rest.get(f"lora_{ours}") is not None}  # fmt: skip
    out.spec["lora"] = lora


def _trackers(rest: dict[str, Any], out: Conversion) -> None:
    report_to = rest.get("report_to")
    chosen = [report_to] if isinstance(report_to, str) else list(report_to or [])
    kept = [t for t in chosen if t in TRACKERS]
    if kept:
        out.spec["logging"] = {"report_to": kept}
    if set(chosen) <= set(TRACKERS):
        rest.pop("report_to", None)


def _drop_refused(out: Conversion) -> None:
    """Move each field JobSpec refuses (a TRL value we do not offer) to `unmapped`, with
    pydantic's reason, until the spec validates."""
    for _ in range(len(out.spec) + 1):
        try:
            # the validated spec's own JSON: YAML's dates and the like never leave here
            out.spec = JobSpec.model_validate(out.spec).model_dump(mode="json", exclude_unset=True)
            return
        except ValidationError as exc:
            # a rule across fields names its field first (max_staleness: must be ...)
            error = worded_errors(exc.errors()[:1], JobSpec)[0]
            top = error["loc"].split(".")[0]
            if top not in out.spec or top in ("name", "rewards"):
                where = "" if error["loc"] == "(body)" else f"{error['loc']}: "
                raise ValueError(
                    f"the converted spec is refused: {where}{error['message']}"
                ) from exc
            out.unmapped[top] = f"{out.spec.pop(top)!r} refused: {error['message']}"


def spec_yaml(conversion: Conversion) -> str:
    """The spec as YAML, after a comment block naming every unmapped field and why."""
    config = "AsyncGRPOConfig" if conversion.spec.get("async_generation") else "GRPOConfig"
    lines = [f"# JobSpec converted from a TRL {config} by `grpo convert`."]
    if conversion.unmapped:
        lines.append("# Not mapped:")
        lines += [f"#   {key}: {why}" for key, why in sorted(conversion.unmapped.items())]
    body = yaml.safe_dump(conversion.spec, sort_keys=False, allow_unicode=True)
    return "\n".join(lines) + "\n" + body
