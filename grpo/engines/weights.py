"""The policy's weights as an engine takes them: named like the plain (unwrapped) model's
checkpoint, with LoRA adapters merged into their base weights, and a copy written once to
disk for the engine to start from. Torch and peft only; never imports vllm."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor

from grpo.models.lora import is_lora

PEFT_PREFIX = "base_model.model."


def policy_weights(model: Any) -> Iterator[tuple[str, Tensor]]:
    """(name, tensor) of every weight of the model the policy is, LoRA merged (W + s B A):
    peft merges in place, the tensors are copied, then it unmerges."""
    if not is_lora(model):
        yield from _plain_weights(model, model.state_dict())
        return
    with torch.no_grad():
        model.merge_adapter()
        try:
            merged = {
                _base_name(name): value.detach().clone()
                for name, value in model.state_dict().items()
                if "lora_" not in name
            }
        finally:
            model.unmerge_adapter()
    yield from _plain_weights(model, merged)


def _plain_weights(model: Any, state: dict[str, Tensor]) -> Iterator[tuple[str, Tensor]]:
    """The state's tensors, and lm_head.weight when the embeddings are tied (vLLM's loader
    of a tied model still expects it in a checkpoint that has it)."""
    for name, value in state.items():
        yield name, value.detach()
    if "lm_head.weight" not in state:
        embeddings = model.get_input_embeddings()
        if embeddings is not None:
            yield "lm_head.weight", embeddings.weight.detach()


def _base_name(name: str) -> str:
    """The plain model's name of a peft-wrapped weight."""
    name = name.removeprefix(PEFT_PREFIX)
    return name.replace(".base_layer.", ".")


def save_engine_copy(model: Any, tokenizer: Any, target: Path) -> Path:
    """The policy (LoRA merged) and tokenizer saved to `target` (replaced), for an engine
    that loads a model directory at start; later weights go in memory (policy_weights).

    Written by every rank (each has its engine): transformers' save_pretrained writes on
    rank 0 only once a process group exists, so the weights go through safetensors here,
    tied ones as separate copies."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    plain = model.get_base_model() if is_lora(model) else model
    state = {name: value.contiguous().clone() for name, value in policy_weights(model)}
    save_file(state, str(target / "model.safetensors"), metadata={"format": "pt"})
    plain.config.save_pretrained(target)
    generation = getattr(plain, "generation_config", None)
    if generation is not None:
        generation.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target
