"""`builtin:small`: a randomly initialised Qwen2-architecture model with a 32k BPE vocabulary.

It does not learn arithmetic; it exists so that every code path a hub model takes runs
offline and in tests: grouped-query attention, RoPE, SwiGLU, RMSNorm, tied embeddings,
numbers that are several tokens, a chat template (which renders tools), special tokens,
and two end-of-sequence ids. Written with `save_pretrained` and loaded back through the
Auto classes like any hub model (loading.py materialises it into the cache;
random_init.py writes it). Knows nothing of GRPO.
"""

from __future__ import annotations

from pathlib import Path

from transformers import Qwen2Config

from grpo.models.bpe_tokenizer import ENDOFTEXT, IM_END, build_bpe_tokenizer
from grpo.models.random_init import save_random_model

SMALL_SEED = 4321
"""Its cache directory's version is grpo/models/builtin_names.py's SMALL_VERSION: bump it
when anything here, the tokenizer's corpus or the chat template changes."""


def small_config(vocab_size: int, *, endoftext_id: int, im_end_id: int) -> Qwen2Config:
    """A Qwen2 of ~11 M parameters (8.2 M of them the tied 32k x 256 embedding): 4 layers,
    4 query heads sharing 2 key/value heads (GQA), head width 64, SwiGLU width 704, RMSNorm,
    RoPE with Qwen2.5's theta, biases on q/k/v as Qwen2 has them."""
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=704,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        hidden_act="silu",
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=True,
        attention_dropout=0.0,
        bos_token_id=endoftext_id,
        eos_token_id=im_end_id,
        pad_token_id=endoftext_id,
    )


def build_small(target: Path) -> None:
    """Write the seeded model, its tokenizer and a generation config ending on both EOS ids."""
    tokenizer = build_bpe_tokenizer()
    vocab = tokenizer.get_vocab()
    endoftext_id, im_end_id = vocab[ENDOFTEXT], vocab[IM_END]
    config = small_config(len(tokenizer), endoftext_id=endoftext_id, im_end_id=im_end_id)
    save_random_model(
        target,
        config,
        tokenizer,
        seed=SMALL_SEED,
        # as Qwen2.5-Instruct: the chat turn's end and the document's end both stop sampling
        eos_token_id=[im_end_id, endoftext_id],
        pad_token_id=endoftext_id,
        bos_token_id=endoftext_id,
    )
