"""Getting a loaded model ready to be the GRPO policy.

Dropout off (GRPO's ratio and KL compare log-probs of the same weights; dropout noise
would make them disagree), LoRA adapters when asked, gradient checkpointing when asked,
and the token ids that end a completion; and the frozen contexts the parts that sample are
given instead of the trainer: PolicyView, what a step's rounds and the held-out evaluation
need (the policy, its tokenizer and device, the run's rewards, engines and generation
settings), whose engine_context is what an engine is given (grpo/engines/context.py).
Knows nothing of the GRPO math.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from grpo.engines.context import EngineContext
from grpo.engines.engine import Engine
from grpo.models.lora import apply_lora
from grpo.rewards.scoring import Rewarder
from grpo.rollout.stopping import StopStrings
from grpo.spec import JobSpec


def prepare_policy(model: Any, spec: JobSpec) -> Any:
    """The trainable policy: dropout disabled, then LoRA and gradient checkpointing if set."""
    disable_dropout(model)
    if spec.lora is not None:
        model = apply_lora(model, spec.lora)
    if spec.gradient_checkpointing:
        _enable_activation_checkpointing(model)
        if spec.lora is not None:
            model.enable_input_require_grads()
    model.eval()
    return model


@contextmanager
def update_mode(model: Any, spec: JobSpec) -> Iterator[None]:
    """Train mode for the update only where it matters: gradient checkpointing (HF runs it
    only in train mode) and LoRA dropout; generation always runs in eval mode with its cache."""
    is_train = spec.gradient_checkpointing or (spec.lora is not None and spec.lora.dropout > 0)
    if not is_train:  # the model stays in eval mode: switching walks every module (~1 ms)
        yield
        return
    model.train()
    try:
        yield
    finally:
        model.eval()


def _enable_activation_checkpointing(model: Any) -> None:
    # transformers 5.2x renamed gradient checkpointing to activation checkpointing
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def disable_dropout(model: torch.nn.Module) -> None:
    """Zero every dropout, including attention dropout read from module attributes."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            setattr(module, "attention_dropout", 0.0)  # noqa: B010 - not every module declares it


def eos_token_ids(tokenizer: Any, model: Any) -> list[int]:
    """Tokens that end a completion: the tokenizer's EOS and the generation config's."""
    ids = {tokenizer.eos_token_id}
    config_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(config_eos if isinstance(config_eos, list) else [config_eos])
    ids.discard(None)
    if not ids:
        raise ValueError("the tokenizer has no EOS token, so completions could never end")
    return sorted(ids)


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    return sum(p.numel() for p in model.parameters() if p.requires_grad), total


@dataclass(frozen=True)
class PolicyView:
    """What sampling a step's rounds (grpo/rollout/rounds.py) and the held-out evaluation
    (grpo/eval/heldout.py) are given: the policy, its tokenizer and device, the run's
    rewards, its engines and generation settings. Built once every part exists (never the
    trainer itself); frozen, so no part changes what another samples with."""

    spec: JobSpec
    run_id: str
    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype | None
    rewarder: Rewarder
    eval_rewarder: Rewarder
    eos_token_ids: list[int]
    stop_strings: StopStrings | None
    uses_chat_template: bool
    log: Callable[[str, str], None]
    engine: Engine
    """Samples the rollouts (grpo/engines/); rounds.py asks it, never the model."""
    eval_engine: Engine
    """The single-turn engine held-out evaluation samples with (the run's, without tools)."""
    tool_schemas: list[dict[str, Any]] | None
    """The spec's tools as the chat template shows them to the model; None without tools."""

    @property
    def engine_context(self) -> EngineContext:
        """What an engine sampling this view's model is given."""
        return EngineContext(
            self.spec, self.model, self.tokenizer, self.device, self.dtype,
            self.eos_token_ids, self.stop_strings, self.log,
        )  # fmt: skip
