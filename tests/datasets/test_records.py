"""grpo/data/records.py: what a dataset record is, the same at upload and at load."""

from __future__ import annotations

from typing import Any

import pytest

from grpo.data.records import Record, RecordError, parse_record, parse_record_line

SYSTEM_USER = [
    {"role": "system", "content": "Answer with a number."},
    {"role": "user", "content": "2+2?"},
]


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"prompt": "2+2?", "answer": "4"}, Record("2+2?", "4", {})),
        ({"prompt": "2+2?", "answer": 4}, Record("2+2?", "4", {})),
        ({"prompt": "p", "answer": None}, Record("p", "", {})),
        ({"prompt": "p", "answer": [1, 2]}, Record("p", "[1, 2]", {})),
        (
            {"prompt": SYSTEM_USER, "answer": "4", "id": "q1", "level": 3, "tests": ["a"]},
            Record(SYSTEM_USER, "4", {"id": "q1", "level": 3, "tests": ["a"]}),
        ),
    ],
)
def test_valid_records_keep_prompt_answer_and_every_other_field(
    record: dict[str, Any], expected: Record
) -> None:
    assert parse_record(record, prompt_field="prompt", answer_field="answer", where="x") == expected


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([1, 2], r"line 7: expected a JSON object, got list"),
        ({"answer": "4"}, r"line 7: missing field 'prompt'"),
        ({"prompt": "p"}, r"line 7: missing field 'answer'"),
        ({"prompt": "", "answer": "4"}, r"line 7: field 'prompt' is empty"),
        ({"prompt": 12, "answer": "4"}, r"line 7: field 'prompt' must be a string or a list"),
        ({"prompt": [], "answer": "4"}, r"line 7: field 'prompt' is an empty list"),
        ({"prompt": ["hi"], "answer": "4"}, r"line 7: prompt\[0\]: a message is"),
        (
            {"prompt": [{"role": "robot", "content": "x"}], "answer": "4"},
            r"line 7: prompt\[0\]: role must be one of system, user, assistant, got 'robot'",
        ),
        (
            {"prompt": [SYSTEM_USER[0], {"role": "user", "content": 5}], "answer": "4"},
            r"line 7: prompt\[1\]: content must be a string, got int",
        ),
        (
            {"prompt": [{"role": "user", "content": "x", "name": "bob"}], "answer": "4"},
            r"line 7: prompt\[0\]: a message is",
        ),
    ],
)
def test_malformed_records_are_errors_naming_where_and_what(record: Any, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        parse_record(record, prompt_field="prompt", answer_field="answer", where="line 7")


def test_a_line_that_is_not_json_is_an_error_naming_it() -> None:
    with pytest.raises(RecordError, match=r"data\.jsonl:3: invalid JSON"):
        parse_record_line(
            "{oops", prompt_field="prompt", answer_field="answer", where="data.jsonl:3"
        )
