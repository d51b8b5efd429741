"""Greedy accuracy of a model on a task split: the number GRPO is meant to raise.

Batched greedy decoding (top-1 sampling) through the same generation loop as training,
scored by the accuracy reward. Knows nothing of training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from grpo.data.example import Example
from grpo.data.prompts import format_prompt
from grpo.rewards.rules import accuracy_reward
from grpo.rollout.policy import eos_token_ids
from grpo.rollout.rollout import decode_completions, generate, tokenize_prompts
from grpo.spec import AccuracyReward
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
    correct = 0.0
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        prompts = [format_prompt(example, data, tokenizer) for example in batch]
        ids, mask = tokenize_prompts(
            tokenizer, prompts, max_length=4096, add_special_tokens=not uses_chat, device=device
        )
        rollout = generate(
            model,
            ids,
            mask,
            num_generations=1,
            max_new_tokens=max_new_tokens,
            eos_token_ids=eos_token_ids(tokenizer, model),
            pad_token_id=tokenizer.pad_token_id,
            sampling=GREEDY,
        )
        texts = decode_completions(tokenizer, rollout)
        correct += sum(
            accuracy_reward(text, example.answer, reward)
            for text, example in zip(texts, batch, strict=True)
        )
    return correct / len(examples)
