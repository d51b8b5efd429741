"""The configurations bench/vs_trl.py compares (model, prompt template, completion length,
prompts per step) and the RunConfig both sides get for one of them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from side_protocol import RunConfig

from grpo.data.prompts import R1_TEMPLATE

SHORT_TEMPLATE = "{prompt}"
REALISTIC_TEMPLATE = "Reply <think></think><answer></answer>. User: {prompt} Assistant:"
"""A short R1-style instruction around the task: 64 prompt tokens with the char tokenizer."""


@dataclass(frozen=True)
class Config:
    model: str
    template: str
    completion_tokens: int
    prompts_per_step: int | None = None
    """None: --prompts-per-step."""


CONFIGS: dict[str, Config] = {
    "short": Config("builtin:tiny-arith", SHORT_TEMPLATE, 16),
    "realistic": Config("builtin:tiny-arith", REALISTIC_TEMPLATE, 32),
    "medium": Config("builtin:small", R1_TEMPLATE, 64, prompts_per_step=4),
}
"""name -> model, prompt template, max completion tokens, prompts per step."""


def configured(base: RunConfig, name: str, model_dirs: dict[str, str], **changes: Any) -> RunConfig:
    """`base` set up as configuration `name`, with `changes`."""
    config = CONFIGS[name]
    return replace(
        base,
        name=name,
        model_dir=model_dirs[config.model],
        prompt_template=config.template,
        max_completion_length=config.completion_tokens,
        prompts_per_step=config.prompts_per_step or base.prompts_per_step,
        **changes,
    )
