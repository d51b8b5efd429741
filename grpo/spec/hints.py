"""Spec errors that finish the sentence: an unknown field names the closest fields of its
section ("did you mean num_generations") and, for a TRL GRPOConfig or TRL script-argument
name, what it is here; a bound says why it is there where a reason exists.

The API's 422 (app/api/errors.py) and `grpo train` word pydantic's errors with `worded_errors`,
so both print the same field list. Pure pydantic, no torch.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

TRL_EQUIVALENTS: dict[str, str] = {
    # GRPOConfig / TrainingArguments
    "per_device_train_batch_size": "prompts_per_step (B prompts a step, each sampled "
    "num_generations times: TRL's batch counts completions, B x G here)",
    "gradient_accumulation_steps": "micro_batch_size (completions per forward/backward; "
    "the step's update covers all its groups either way)",
    "steps_per_generation": "generation_batch_size (completions decoded at once)",
    "bf16": "precision: bf16",
    "fp16": "precision: fp16",
    "torch_dtype": "precision (auto, fp32, bf16 or fp16)",
    "num_train_epochs": "max_steps (GRPO steps, one generation batch each)",
    "output_dir": "nothing in a spec: the service keeps each run's checkpoints; `grpo train "
    "--workdir DIR` in the terminal",
    "logging_steps": "nothing: every step is logged",
    "save_strategy": "save_steps (0: only at the end) and save_final",
    "save_total_limit": "nothing: the latest checkpoints are kept, and the final one",
    "reward_funcs": "rewards (a list of {name: ...} entries)",
    "reward_weights": "rewards[].weight",
    "warmup_ratio": "warmup_steps",
    "ref_model_sync_every": "ref_model_sync_steps",
    "use_peft": "lora (a section: {r: 16})",
    "lora_r": "lora.r",
    "lora_alpha": "lora.alpha",
    "lora_dropout": "lora.dropout",
    "lora_target_modules": "lora.target_modules",
    "use_cpu": "device: cpu",
    "log_completions": "logging (every step's groups are kept for the run page)",
    # script arguments (trl's ScriptArguments, ModelConfig)
    "model_name_or_path": "model (a hub id, a local directory or builtin:...)",
    "dataset_name": "data.source (dataset:<id> of an upload, hf:org/name, a local file)",
    "dataset_config": "data.source (one source, one configuration)",
    "dataset_train_split": "data.split",
    "dataset_test_split": "eval.split",
}
"""TRL names that are not ours, and what to write here instead."""

_AT_TOP = ("learning_rate", "beta", "epsilon", "num_generations", "max_completion_length",
           "max_prompt_length", "temperature", "loss_type", "scale_rewards", "seed")  # fmt: skip
"""TRL names that are ours too, at the top level of the spec: a hint when found nested."""

BOUND_REASONS: dict[str, str] = {
    "num_generations": "a group needs two completions to compare (advantages are relative "
    "within a group)",
    "prompts_per_step": "a step needs a prompt to sample",
    "max_steps": "a run trains at least one step",
    "num_iterations": "each generation batch is used for at least one update",
    "max_completion_length": "a completion needs a token to be scored",
}
"""Why a field's bound is there, said after pydantic's "greater than or equal to ..."."""

_BOUND_TYPES = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def worded_errors(
    errors: Iterable[Mapping[str, Any]], model: type[BaseModel], *, drop: tuple[str, ...] = ()
) -> list[dict[str, str]]:
    """pydantic's errors for `model` as {"loc", "message"} rows, with the hints above;
    `drop`: leading loc parts that are not fields (FastAPI's "body")."""
    rows = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        while loc and loc[0] in drop:
            loc = loc[1:]
        message = str(err.get("msg", "")).removeprefix("Value error, ")
        kind = err.get("type")
        if kind == "extra_forbidden" and loc:
            message = unknown_field_message(loc, model)
        elif kind in _BOUND_TYPES and loc and loc[-1] in BOUND_REASONS:
            message = f"{message}: {BOUND_REASONS[loc[-1]]}"
        elif not loc and (named := _named_field(message, model)):
            loc, message = named.split("."), message[len(named) + 2 :]
        rows.append({"loc": ".".join(loc) or "(body)", "message": message})
    return rows


def _named_field(message: str, model: type[BaseModel]) -> str | None:
    """The field a rule across fields names first (`<field>: <why>`, a dotted path whose
    head is one of the model's fields), so its 422 names the field; None otherwise."""
    head, sep, _ = message.partition(": ")
    is_path = sep and re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*", head)
    return head if is_path and head.split(".")[0] in model.model_fields else None


def invalid_spec_text(errors: Iterable[Mapping[str, Any]], model: type[BaseModel]) -> str:
    """The field list of a 422 (the API's `fields`) as lines for a terminal."""
    rows = worded_errors(errors, model)
    return "invalid job spec:\n" + "\n".join(f"  {r['loc']}: {r['message']}" for r in rows)


def unknown_field_message(loc: list[str], model: type[BaseModel]) -> str:
    """ "unknown field" with what the user may have meant, for the field at `loc`."""
    name = loc[-1]
    known = sorted({f for m in section_models(loc[:-1], model) for f in m.model_fields})
    parts = [f"unknown field {name!r}"]
    if name in TRL_EQUIVALENTS:
        parts.append(f"TRL's {name} is {TRL_EQUIVALENTS[name]} here")
    elif name in _AT_TOP and len(loc) > 1:
        parts.append(f"{name} is a top-level field of the spec")
    else:
        close = closest(name, known)
        if close:
            parts.append(f"did you mean {' or '.join(close)}?")
    if known and len(parts) == 1:
        parts.append(f"fields here: {', '.join(known)}")
    return "; ".join(parts)


def closest(name: str, known: list[str]) -> list[str]:
    """Up to 3 of `known` most like `name` (difflib's ratio at least 0.6), without those
    clearly further than the best: `num_generation` means num_generations, not num_iterations."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, name, k).ratio(), k) for k in known), reverse=True
    )
    if not scored or scored[0][0] < 0.6:
        return []
    best = scored[0][0]
    return [k for score, k in scored[:3] if score >= max(0.6, best - 0.1)]


def section_models(path: list[str], model: type[BaseModel]) -> list[type[BaseModel]]:
    """The pydantic models the section at `path` may be (field names, list indices and the
    tags of discriminated unions, as pydantic's locs give them); several until a tag picks."""
    current = [model]
    for part in path:
        fields = [m.model_fields[part] for m in current if part in m.model_fields]
        if fields:
            current = _models_in(fields[0].annotation)
        elif not part.isdigit():  # an index: the element type was taken already
            current = [m for m in current if _is_tagged(m, part)]
    return current


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models inside Optional[...], tuple[..., ...], list[...] and unions of models."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, tuple, list):
        found: list[type[BaseModel]] = []
        for arg in typing.get_args(annotation):
            found += [m for m in _models_in(arg) if m not in found]
        return found
    return []


def _is_tagged(model: type[BaseModel], tag: str) -> bool:
    """Whether `tag` is the discriminator value of `model` (its `name` Literal)."""
    name_field = model.model_fields.get("name")
    return name_field is not None and tag in typing.get_args(name_field.annotation)
