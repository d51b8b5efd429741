"""The weights an engine takes (grpo/engines/weights.py): a plain model's own state; with
LoRA the adapters merged into their base weights under the plain model's names, the live
model left unmerged; and a starting copy written on every rank that loads back as the policy."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from grpo.engines.weights import policy_weights, save_engine_copy
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.models.lora import apply_lora
from grpo.spec.optimization import LoraSpec
from tests.tiny_lm import tiny_llama


def test_lora_weights_are_pushed_merged_under_the_plain_names() -> None:
    tokenizer = build_char_tokenizer()
    plain_names = set(tiny_llama(tokenizer).state_dict())
    model = apply_lora(tiny_llama(tokenizer), LoraSpec(r=4))
    with torch.no_grad():  # B starts at 0: give the adapters a visible update
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    ids = torch.tensor([[3, 4, 5, 6]])
    expected_logits = model(input_ids=ids).logits
    pushed = dict(policy_weights(model))
    assert plain_names <= set(pushed) and not any("lora_" in n for n in pushed)
    merged = tiny_llama(tokenizer)
    merged.load_state_dict({n: pushed[n] for n in merged.state_dict()})
    torch.testing.assert_close(merged(input_ids=ids).logits, expected_logits, atol=1e-5, rtol=0)
    base = tiny_llama(tokenizer)  # the pushed weights are not the base's: the update is in
    assert not torch.allclose(base(input_ids=ids).logits, expected_logits, atol=1e-3)
    # the live model is unmerged again: its adapters still train on the base weights
    torch.testing.assert_close(model(input_ids=ids).logits, expected_logits)


def test_the_starting_copy_loads_back_as_the_policy(tmp_path: Path) -> None:
    tokenizer = build_char_tokenizer()
    model = tiny_llama(tokenizer)
    target = save_engine_copy(model, tokenizer, tmp_path / "vllm-model-rank0")
    loaded = AutoModelForCausalLM.from_pretrained(target)
    ids = torch.tensor([[3, 4, 5, 6]])
    torch.testing.assert_close(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
