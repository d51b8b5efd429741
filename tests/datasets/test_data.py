"""grpo/data/loading.py: sources, their errors, prompt formatting and the resumable prompt order."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from grpo.data.example import Example
from grpo.data.loading import PromptSampler, load_examples
from grpo.data.prompts import R1_TEMPLATE, check_prompts_render, format_prompt
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.spec.data import DataSpec


def test_arith_splits_are_disjoint_deterministic_and_correct() -> None:
    train = load_examples(DataSpec(), split="train")
    test = load_examples(DataSpec(), split="test")
    assert len(test) == 400 and len(train) > 3000
    assert not {e.prompt for e in train} & {e.prompt for e in test}
    assert train == load_examples(DataSpec())  # default split is train
    for example in train + test:
        a, op, b = re.fullmatch(r"(\d\d)([+-])(\d\d)=", example.prompt).groups()
        assert int(example.answer) == (int(a) + int(b) if op == "+" else int(a) - int(b))
        assert int(example.answer) >= 0
    assert len({e.id for e in train + test}) == len(train) + len(test)


def test_arith_unknown_split_is_rejected() -> None:
    with pytest.raises(ValueError, match="validation"):
        load_examples(DataSpec(), split="validation")


def _write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_jsonl_reads_named_fields(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "d.jsonl",
        [json.dumps({"q": "2+2?", "a": 4, "id": "x1"}), "", json.dumps({"q": "3+3?", "a": "6"})],
    )
    examples = load_examples(DataSpec(source=str(path), prompt_field="q", answer_field="a"))
    assert examples == [Example("x1", "2+2?", "4"), Example("3", "3+3?", "6")]


def test_jsonl_missing_field_names_line_and_field(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "d.jsonl", ['{"prompt": "a", "answer": "b"}', '{"prompt": "c"}'])
    with pytest.raises(ValueError, match=r"d\.jsonl:2.*'answer'"):
        load_examples(DataSpec(source=str(path)))


def test_jsonl_invalid_json_names_line(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "d.jsonl", ["{not json"])
    with pytest.raises(ValueError, match=r"d\.jsonl:1.*invalid JSON"):
        load_examples(DataSpec(source=str(path)))


def test_empty_jsonl_is_rejected(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "d.jsonl", ["", "  "])
    with pytest.raises(ValueError, match="dataset is empty"):
        load_examples(DataSpec(source=str(path)))


def test_missing_jsonl_file_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        load_examples(DataSpec(source=str(tmp_path / "none.jsonl")))


def test_uploaded_dataset_is_read_from_datasets_dir(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "my-set_1.jsonl", ['{"prompt": "p", "answer": "a"}'])
    examples = load_examples(DataSpec(source="dataset:my-set_1"), datasets_dir=tmp_path)
    assert examples == [Example("1", "p", "a")]


@pytest.mark.parametrize("dataset_id", ["../secret", "a/b", "..", "x.jsonl", ""])
def test_dataset_ids_cannot_escape_datasets_dir(tmp_path: Path, dataset_id: str) -> None:
    with pytest.raises(ValueError, match="invalid dataset id"):
        load_examples(DataSpec(source=f"dataset:{dataset_id}"), datasets_dir=tmp_path)


def test_format_prompt_replaces_placeholder_without_str_format() -> None:
    data = DataSpec(prompt_template="Q: {prompt} {x} {0}\nA:")
    example = Example("1", "what is {y}?", "z")
    text = format_prompt(example, data, build_char_tokenizer())
    assert text == "Q: what is {y}? {x} {0}\nA:"


class _ChatTokenizer:
    chat_template = "x"

    def apply_chat_template(self, messages: list[dict[str, str]], **kwargs: object) -> str:
        assert kwargs == {"tokenize": False, "add_generation_prompt": True}
        return f"<user>{messages[0]['content']}</user><assistant>"


def test_format_prompt_applies_chat_template_only_when_asked() -> None:
    example = Example("1", "2+2=", "4")
    assert format_prompt(example, DataSpec(), _ChatTokenizer()) == "<user>2+2=</user><assistant>"
    plain = DataSpec(use_chat_template=False)
    assert format_prompt(example, plain, _ChatTokenizer()) == "2+2="


def test_r1_template_wraps_the_prompt() -> None:
    data = DataSpec(prompt_template=R1_TEMPLATE, use_chat_template=False)
    text = format_prompt(Example("1", "2+2", "4"), data, build_char_tokenizer())
    assert "User: 2+2. Assistant:" in text and "<answer>" in text


def _examples(n: int) -> list[Example]:
    return [Example(str(i), f"p{i}", str(i)) for i in range(n)]


def test_sampler_covers_each_epoch_once_and_is_seeded() -> None:
    examples = _examples(10)
    sampler = PromptSampler(examples, batch_size=5, seed=3)
    first_epoch = sampler.batch(1) + sampler.batch(2)
    assert sorted(e.id for e in first_epoch) == sorted(e.id for e in examples)
    assert first_epoch != examples  # shuffled
    other_seed = PromptSampler(examples, batch_size=5, seed=4)
    assert other_seed.batch(1) + other_seed.batch(2) != first_epoch


def test_sampler_resumed_at_step_k_matches_uninterrupted_run() -> None:
    examples = _examples(7)  # batches straddle epoch boundaries
    uninterrupted = PromptSampler(examples, batch_size=3, seed=0)
    run = [uninterrupted.batch(step) for step in range(1, 13)]
    resumed = PromptSampler(examples, batch_size=3, seed=0)
    assert [resumed.batch(step) for step in range(6, 13)] == run[5:]


def test_sampler_rejects_step_zero() -> None:
    with pytest.raises(ValueError, match="1-based"):
        PromptSampler(_examples(3), batch_size=2, seed=0).batch(0)


CONVERSATION = [
    {"role": "system", "content": "Answer with a number."},
    {"role": "user", "content": "What is 2+2?"},
]


def test_jsonl_chat_prompts_and_extra_fields_reach_the_example(tmp_path: Path) -> None:
    record = {"prompt": CONVERSATION, "answer": 4, "id": "c1", "tests": ["assert f() == 4"]}
    path = _write_jsonl(tmp_path / "d.jsonl", [json.dumps(record)])
    (example,) = load_examples(DataSpec(source=str(path)))
    assert example.prompt == CONVERSATION and example.answer == "4"
    assert example.data == {"id": "c1", "tests": ["assert f() == 4"]}


def test_jsonl_malformed_message_names_file_line_and_message(tmp_path: Path) -> None:
    bad = {"prompt": [{"role": "user", "content": ["x"]}], "answer": "1"}
    path = _write_jsonl(tmp_path / "d.jsonl", ['{"prompt": "a", "answer": "b"}', json.dumps(bad)])
    with pytest.raises(ValueError, match=r"d\.jsonl:2: prompt\[0\]: content must be a string"):
        load_examples(DataSpec(source=str(path)))


def test_chat_prompt_renders_with_the_chat_template_and_template_fills_the_user_turn(
    small_tokenizer: Any,
) -> None:
    example = Example("c1", CONVERSATION, "4")
    data = DataSpec(prompt_template="Q: {prompt} A:")
    assert format_prompt(example, data, small_tokenizer) == (
        "<|im_start|>system\nAnswer with a number.<|im_end|>\n"
        "<|im_start|>user\nQ: What is 2+2? A:<|im_end|>\n<|im_start|>assistant\n"
    )


def test_chat_prompts_without_a_chat_template_are_refused_before_training(
    small_tokenizer: Any,
) -> None:
    examples = [Example("s", "plain", "1"), Example("c1", CONVERSATION, "4")]
    check_prompts_render(examples, DataSpec(), small_tokenizer)
    with pytest.raises(ValueError, match="'c1' is a list of chat messages, but data.use_chat"):
        check_prompts_render(examples, DataSpec(use_chat_template=False), small_tokenizer)
    with pytest.raises(ValueError, match="tokenizer has no chat template"):
        check_prompts_render(examples, DataSpec(), build_char_tokenizer())
