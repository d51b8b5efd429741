"""grpo/models/small_warmup.py: what builtin:small-arith's warm-up trains on, its
labelled-positions loss, and the cached model it made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from grpo.data.example import Example
from grpo.models.builtin_names import SMALL_ARITH_VERSION, SMALL_VERSION
from grpo.models.loading import builtin_dir
from grpo.models.small_warmup import (
    SMALL_TARGET_ACCURACY,
    encode_chat_examples,
    labelled_head_loss,
)
from grpo.models.warmup import model_loss

EXAMPLES = [Example("a", "07+35=", "42"), Example("b", "09-09=", "0")]


def test_the_question_is_the_user_turn_and_only_the_answer_and_im_end_are_labels(
    small_tokenizer: Any,
) -> None:
    input_ids, attention_mask, labels = encode_chat_examples(EXAMPLES, small_tokenizer)
    assert small_tokenizer.decode(input_ids[0]) == (
        "<|im_start|>user\n07+35=<|im_end|>\n<|im_start|>assistant\n42<|im_end|>"
    )
    assert small_tokenizer.decode(labels[0][labels[0] != -100]) == "42<|im_end|>"
    assert small_tokenizer.decode(labels[1][labels[1] != -100]) == "0<|im_end|>"
    length = int(attention_mask[1].sum())  # one digit shorter: right-padded by one
    assert attention_mask[1].tolist() == [1] * length + [0] * (input_ids.shape[1] - length)
    assert small_tokenizer.decode(input_ids[1, length:]) == "<|endoftext|>"


def test_the_head_on_labelled_positions_alone_is_the_models_own_loss(
    small_tokenizer: Any, grpo_cache_dir: Path
) -> None:
    model = AutoModelForCausalLM.from_pretrained(
        builtin_dir("builtin:small", grpo_cache_dir, progress=False)
    )
    tensors = encode_chat_examples(EXAMPLES, small_tokenizer)
    with torch.no_grad():
        assert labelled_head_loss(model, *tensors).item() == pytest.approx(
            model_loss(model, *tensors).item(), rel=1e-5
        )


def test_small_arith_lands_in_the_band_where_grpo_has_signal(grpo_cache_dir: Path) -> None:
    directory = builtin_dir("builtin:small-arith", grpo_cache_dir, progress=False)
    assert directory.name == f"builtin-small-arith-{SMALL_VERSION}-{SMALL_ARITH_VERSION}"
    report = json.loads((directory / "warmup.json").read_text())
    assert report["validation_accuracy"] >= SMALL_TARGET_ACCURACY  # stopped on reaching it
    assert 0.2 <= report["test_accuracy"] <= 0.6  # mixed groups: neither all right nor wrong
