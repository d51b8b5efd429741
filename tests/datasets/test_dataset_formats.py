"""Datasets as TRL users hold them (grpo/data/loading.py): parquet and JSONL files, `hf:`
sources with a subset and a split from the local cache, standard and conversational
prompts, and data.system_prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo.data.example import Example
from grpo.data.loading import load_examples
from grpo.data.parquet import BATCH_ROWS, parquet_records
from grpo.data.prompts import check_prompts_render, prompt_messages
from grpo.data.record_files import system_prompt_clash
from grpo.spec.data import DataSpec
from tests.hub_cache import save_hub_dataset

STANDARD = [{"prompt": f"{i}+1=", "solution": str(i + 1), "level": i % 3} for i in range(5)]
CONVERSATIONAL = [
    {"prompt": [{"role": "user", "content": f"{i}+1="}], "solution": str(i + 1)} for i in range(5)
]


@pytest.mark.parametrize("rows", [STANDARD, CONVERSATIONAL], ids=["standard", "conversational"])
@pytest.mark.parametrize("suffix", ["parquet", "jsonl", "data"])
def test_parquet_and_jsonl_files_load_the_same_examples(
    tmp_path: Path, rows: list[dict[str, object]], suffix: str
) -> None:
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / f"d.{suffix}"  # parquet is told by its magic bytes, not its name
    if suffix != "jsonl":
        pq.write_table(pa.Table.from_pylist(rows), path)
    data = DataSpec(source=str(path), answer_field="solution")
    examples = load_examples(data)
    assert examples == load_examples(data.model_copy(update={"source": str(jsonl)}))
    assert [e.answer for e in examples] == [str(i + 1) for i in range(5)]
    assert examples[0].prompt == rows[0]["prompt"]


def test_parquet_is_read_a_record_batch_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"prompt": [f"p{i}" for i in range(3 * BATCH_ROWS)]}), path)
    rows = parquet_records(path)
    assert next(rows) == {"prompt": "p0"}  # a generator: nothing past the first batch read
    assert sum(1 for _ in rows) == 3 * BATCH_ROWS - 1


def test_a_hub_dataset_loads_by_subset_and_split_from_the_local_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    row = lambda cfg, split, i: {"problem": f"{cfg}/{split}/{i}", "solution": str(i)}  # noqa: E731
    save_hub_dataset(
        tmp_path,
        "acme/tiny-math",
        {
            c: {s: [row(c, s, i) for i in range(3)] for s in ("train", "test")}
            for c in ("easy", "hard")
        },
    )
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path.parent)  # no same-named directory in the working directory
    data = DataSpec(
        source="hf:acme/tiny-math", subset="hard", split="test",
        prompt_field="problem", answer_field="solution",
    )  # fmt: skip
    examples = load_examples(data)
    assert [e.prompt for e in examples] == ["hard/test/0", "hard/test/1", "hard/test/2"]
    easy = load_examples(
        data.model_copy(update={"source": "hf:acme/tiny-math:easy"}), split="train"
    )
    assert [e.answer for e in easy] == ["0", "1", "2"]


class ChatTokenizer:
    chat_template = "{{ messages }}"


def test_system_prompt_comes_first_and_clashes_with_a_records_own() -> None:
    data = DataSpec(source="x.jsonl", system_prompt="Think step by step.")
    plain = Example(id="a", prompt="1+1=", answer="2")
    chat = Example(id="b", prompt=[{"role": "user", "content": "2+2="}], answer="4")
    system = {"role": "system", "content": "Think step by step."}
    assert prompt_messages(plain, data) == [system, {"role": "user", "content": "1+1="}]
    assert prompt_messages(chat, data) == [system, {"role": "user", "content": "2+2="}]
    check_prompts_render([plain, chat], data, ChatTokenizer())
    own = Example(id="c", prompt=[{"role": "system", "content": "x"}, *chat.prompt], answer="4")
    with pytest.raises(ValueError, match=r"data.system_prompt .* prompt 'c' already has one"):
        check_prompts_render([plain, own], data, ChatTokenizer())
    with pytest.raises(ValueError, match="data.system_prompt needs a chat template"):
        check_prompts_render([plain], data, object())


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_file_whose_prompts_carry_a_system_turn_is_named_for_the_submit_check(
    tmp_path: Path, fmt: str
) -> None:
    rows = [*CONVERSATIONAL[:2], {"prompt": [{"role": "system", "content": "s"}], "solution": "1"}]
    path = tmp_path / f"d.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    where = "row 3" if fmt == "parquet" else "line 3"
    assert f"prompt of {where} already has one" in str(system_prompt_clash(path, "prompt"))
    assert system_prompt_clash(path, "other") is None
