"""Greedy accuracy of a model on a task split: the number GRPO is meant to raise.

Batched greedy decoding (top-1 sampling) through the engine interface training samples
with (grpo/engines/): the native engine over the bare model, which runs the same decode
loop; scored by the accuracy reward. Knows nothing of training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from grpo.data.example import Example
from grpo.data.prompts import format_prompt
from grpo.engines.context import EngineContext
from grpo.engines.engine import Engine, GenerationRequest
from grpo.engines.native import NativeEngine
from grpo.rewards.rules import accuracy_reward
from grpo.rollout.policy import eos_token_ids
from grpo.rollout.rollout import decode_completions, tokenize_prompts
from grpo.spec import AccuracyReward, JobSpec
from grpo.spec.data import DataSpec
from grpo.spec.generation import GREEDY


@torch.no_grad()
def greedy_accuracy(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    data: DataSpec,
    *,
    max_new_tokens: int = 16,
    batch_size: int = 64,
    reward: AccuracyReward | None = None,
) -> float:
    """Fraction of examples whose greedy completion earns accuracy reward 1."""
    if not examples:
        raise ValueError("no examples to evaluate")
    reward = reward or AccuracyReward()
    device = next(model.parameters()).device
    uses_chat = data.use_chat_template and bool(getattr(tokenizer, "chat_template", None))
    engine = native_engine(model, tokenizer, device)
    correct = 0.0
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        prompts = [format_prompt(example, data, tokenizer) for example in batch]
        ids, mask = tokenize_prompts(
            tokenizer, prompts, max_length=4096, add_special_tokens=not uses_chat, device=device
        )
        rollout = engine.generate(GenerationRequest(ids, mask, 1, max_new_tokens, GREEDY))
        texts = decode_completions(tokenizer, rollout)
        correct += sum(
            accuracy_reward(text, example.answer, reward)
            for text, example in zip(texts, batch, strict=True)
        )
    return correct / len(examples)


def native_engine(model: Any, tokenizer: Any, device: torch.device) -> Engine:
    """The native engine over a bare model, outside any run: no autocast (the model's own
    dtype), no stop strings, every completion decoded at once (a default spec's
    generation_batch_size), the model's and tokenizer's EOS ids."""
    context = EngineContext(
        spec=JobSpec(),
        model=model,
        tokenizer=tokenizer,
        device=device,
        dtype=None,
        eos_token_ids=eos_token_ids(tokenizer, model),
        stop_strings=None,
        log=lambda level, message: None,
    )
    return NativeEngine(context)
