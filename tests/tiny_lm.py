"""A tiny random Llama and a sampler for the rollout and log-prob tests (not a test module)."""

from dataclasses import fields

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from grpo.rollout.rollout import (
    CompletionEnds,
    Rollout,
    generate,
    prompt_positions,
    tokenize_prompts,
)
from grpo.spec.generation import Sampling

CPU = torch.device("cpu")
SAMPLING_KNOBS = [f.name for f in fields(Sampling)]


def tiny_causal_lm(tokenizer, config_class=LlamaConfig, **knobs):
    """A tiny random causal LM of `config_class`'s architecture (seed 0), in eval mode."""
    torch.manual_seed(0)
    config = config_class(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **knobs,
    )
    return AutoModelForCausalLM.from_config(config).eval()


def tiny_llama(tokenizer) -> LlamaForCausalLM:
    return tiny_causal_lm(tokenizer)


def sample(model, tokenizer, prompts, *, g=3, max_new=6, seed=0, **kwargs) -> Rollout:
    """G completions of each prompt; group b draws from seed + b; `kwargs` may hold
    Sampling's knobs (temperature, top_p, ...) and generate's other keywords."""
    ids, mask = tokenize_prompts(
        tokenizer, prompts, max_length=32, add_special_tokens=True, device=CPU
    )
    return generate(
        model,
        ids,
        mask,
        num_generations=g,
        ends=CompletionEnds(
            max_new,
            tuple(kwargs.pop("eos", [tokenizer.eos_token_id])),
            tokenizer.pad_token_id,
            kwargs.pop("stop", None),
        ),
        seeds=kwargs.pop("seeds", [seed + b for b in range(len(prompts))]),
        sampling=Sampling(**{k: kwargs.pop(k) for k in SAMPLING_KNOBS if k in kwargs}),
        **kwargs,
    )


def completion_logits(model, rollout: Rollout) -> torch.Tensor:
    """(N, T, V) the logits that predict each completion token, from the model's own plain
    forward of prompt + completion (every transform after its LM head applied)."""
    g, width = rollout.num_generations, rollout.completion_ids.shape[1]
    ids = torch.cat([rollout.prompt_ids.repeat_interleave(g, 0), rollout.completion_ids], 1)
    mask = torch.cat([rollout.prompt_mask.repeat_interleave(g, 0), rollout.completion_mask], 1)
    with torch.no_grad():
        logits = model(
            input_ids=ids, attention_mask=mask, position_ids=prompt_positions(mask)
        ).logits
    return logits[:, -width - 1 : -1]
