"""grpo/data/prompt_fit.py: a long prompt loses the start of its content, never its template."""

from __future__ import annotations

from typing import Any

import pytest

from grpo.data.example import Example
from grpo.data.prompt_fit import fit_prompt
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.spec.data import DataSpec

SYSTEM = {"role": "system", "content": "You are a careful calculator."}


def _count(tokenizer: Any, text: str, *, special: bool) -> int:
    return len(tokenizer(text, add_special_tokens=special)["input_ids"])


def test_a_prompt_that_fits_is_left_alone(small_tokenizer: Any) -> None:
    example = Example("1", [SYSTEM, {"role": "user", "content": "2+2?"}], "4")
    fitted = fit_prompt(
        example, DataSpec(), small_tokenizer, max_length=64, add_special_tokens=False
    )
    assert not fitted.is_truncated and fitted.text.endswith(
        "2+2?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_long_chat_prompt_keeps_its_system_turn_markers_and_question(
    small_tokenizer: Any,
) -> None:
    question = "filler words " * 200 + "so what is 2+2?"
    example = Example("long", [SYSTEM, {"role": "user", "content": question}], "4")
    fitted = fit_prompt(
        example, DataSpec(), small_tokenizer, max_length=60, add_special_tokens=False
    )
    assert fitted.is_truncated
    assert _count(small_tokenizer, fitted.text, special=False) <= 60
    assert fitted.text.startswith("<|im_start|>system\nYou are a careful calculator.<|im_end|>\n")
    assert "<|im_start|>user\n" in fitted.text
    assert fitted.text.endswith("so what is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    assert _count(small_tokenizer, fitted.text, special=False) >= 55  # cut no more than needed


def test_a_long_string_prompt_keeps_its_prompt_template() -> None:
    tokenizer = build_char_tokenizer()  # BOS is added: counted with the special tokens
    data = DataSpec(prompt_template="Q: {prompt} A:", use_chat_template=False)
    example = Example("s", "abcdefghij" * 5, "x")
    fitted = fit_prompt(example, data, tokenizer, max_length=20, add_special_tokens=True)
    assert fitted.is_truncated and fitted.text == "Q: " + ("abcdefghij" * 5)[-13:] + " A:"
    assert _count(tokenizer, fitted.text, special=True) == 20


def test_a_prompt_whose_template_alone_does_not_fit_is_refused_naming_it(
    small_tokenizer: Any,
) -> None:
    example = Example("q9", [SYSTEM, {"role": "user", "content": "2+2?"}], "4")
    with pytest.raises(
        ValueError, match=r"prompt 'q9' does not fit max_prompt_length \(10 tokens\)"
    ):
        fit_prompt(example, DataSpec(), small_tokenizer, max_length=10, add_special_tokens=False)
