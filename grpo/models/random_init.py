"""Writing a randomly initialised model to disk, the way the built-in models are made
(loading.py's builtin:tiny, builtin_small.py's builtin:small): seeded in a forked RNG scope,
so building one never disturbs the caller's RNG. Knows nothing of GRPO."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig


def save_random_model(
    target: Path, config: PretrainedConfig, tokenizer: Any, *, seed: int, **generation: Any
) -> None:
    """A model of `config` initialised from `seed`, its tokenizer, and its generation config
    with `generation` set, written to `target` with `save_pretrained`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    for key, value in generation.items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
