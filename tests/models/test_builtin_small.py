"""grpo/models/builtin_small.py, grpo/models/bpe_tokenizer.py: a Qwen2 with a real BPE loads
like a hub model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo.models.bpe_tokenizer import VOCAB_SIZE, train_backend
from grpo.models.builtin_names import SMALL_VERSION
from grpo.models.loading import load_policy
from grpo.rollout.policy import count_parameters, eos_token_ids


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    load_policy("builtin:small", cache_dir=cache, progress=False)
    return cache / f"builtin-small-{SMALL_VERSION}"


def test_builtin_small_is_a_qwen2_with_gqa_tied_embeddings_and_about_11m_parameters(
    small_dir: Path,
) -> None:
    model = AutoModelForCausalLM.from_pretrained(small_dir)
    config = model.config
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert config.num_key_value_heads < config.num_attention_heads  # grouped-query attention
    assert config.hidden_act == "silu" and config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    _, total = count_parameters(model)
    assert 10e6 <= total <= 15e6
    assert config.vocab_size == VOCAB_SIZE


def test_builtin_small_tokenizer_is_byte_level_bpe_with_multi_token_numbers(
    small_dir: Path,
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(small_dir)
    assert len(tokenizer) == VOCAB_SIZE
    text = "Ünïcödé → 12345 apples, the answer\n\tis <answer> 7 </answer>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text  # bytes: nothing is lost or <unk>
    assert ids == train_backend().encode(text, add_special_tokens=False).ids  # reload = build
    digits = tokenizer("12345", add_special_tokens=False)["input_ids"]
    assert len(digits) == 5  # one token per digit, as Qwen2's split does
    assert len(tokenizer(" the", add_special_tokens=False)["input_ids"]) == 1  # merges learned


def test_builtin_small_renders_chatml_and_ends_on_two_eos_ids(small_dir: Path) -> None:
    model, tokenizer = load_policy(str(small_dir), cache_dir=small_dir.parent, progress=False)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")  # a special token, one id
    im_end, endoftext = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert eos_token_ids(tokenizer, model) == sorted([im_end, endoftext])
    assert tokenizer.pad_token_id == endoftext and tokenizer.bos_token_id is None
    assert tokenizer.decode([im_end, endoftext], skip_special_tokens=True) == ""


def test_builtin_small_is_seeded_and_built_identically_twice(tmp_path: Path) -> None:
    first, tok_a = load_policy("builtin:small", cache_dir=tmp_path / "a", progress=False)
    second, tok_b = load_policy("builtin:small", cache_dir=tmp_path / "b", progress=False)
    torch.testing.assert_close(first.lm_head.weight, second.lm_head.weight, rtol=0, atol=0)
    assert tok_a.get_vocab() == tok_b.get_vocab()
