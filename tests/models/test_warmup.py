"""grpo/models/warmup.py: what the warm-up trains on, and the cached builtin:tiny-arith it made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo.data.arith_task import arith_examples
from grpo.data.example import Example
from grpo.models.builtin_names import RECIPE_VERSION
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.models.loading import load_policy
from grpo.models.warmup import encode_examples, greedy_accuracy


def test_only_the_answer_and_eos_are_trained_on() -> None:
    tokenizer = build_char_tokenizer()
    input_ids, attention_mask, labels = encode_examples(
        [Example("a", "07+35=", "42"), Example("b", "9-9=", "0")], tokenizer
    )
    assert tokenizer.decode(input_ids[0]) == "<s>07+35=42</s>"
    assert attention_mask[1].tolist() == [1] * 7 + [0] * 3  # right-padded for training
    assert tokenizer.decode(labels[0][labels[0] != -100]) == "42</s>"
    assert tokenizer.decode(labels[1][labels[1] != -100]) == "0</s>"


@pytest.mark.usefixtures("one_torch_thread")
def test_tiny_arith_lands_in_the_band_where_grpo_has_signal(grpo_cache_dir: Path) -> None:
    model, tokenizer = load_policy("builtin:tiny-arith", cache_dir=grpo_cache_dir, progress=False)
    report = json.loads(
        (grpo_cache_dir / f"builtin-tiny-arith-{RECIPE_VERSION}" / "warmup.json").read_text()
    )
    accuracy = greedy_accuracy(model, tokenizer, arith_examples("test"))
    assert accuracy == pytest.approx(report["test_accuracy"], abs=1e-3)  # reloads what it saved
    assert 0.25 <= accuracy <= 0.55  # mixed groups: neither all right nor all wrong
