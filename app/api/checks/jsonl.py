"""Checking an uploaded JSONL dataset, line by line from a file, without holding it whole.

Lines end at `\\n` only: U+2028, U+0085 and other Unicode line breaks are valid inside JSON
strings. Every refusal names the line. Knows nothing of HTTP beyond the error it raises.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.api.errors import ApiError
from grpo.spec.records import RecordError, parse_record


@dataclass(frozen=True)
class JsonlSummary:
    num_records: int
    fields: list[str]


def bad_dataset(message: str) -> ApiError:
    return ApiError(422, "invalid_dataset", message)


def check_jsonl_file(
    path: Path, *, prompt_field: str, answer_field: str | None, max_lines: int
) -> JsonlSummary:
    """Every non-blank line a record as the trainer reads it (grpo/spec/records.py), of text the
    store and the tokenizer can take (no NUL, no lone surrogate); the fields records have."""
    fields = {prompt_field} | ({answer_field} if answer_field else set())
    count = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            count += 1
            if count > max_lines:
                raise bad_dataset(
                    f"more than {max_lines} records; at most {max_lines} are accepted"
                )
            record = _parse_line(raw, number)
            try:
                parsed = parse_record(
                    record,
                    prompt_field=prompt_field,
                    answer_field=answer_field,
                    where=f"line {number}",
                )
            except RecordError as exc:
                raise bad_dataset(str(exc)) from exc
            fields |= set(parsed.data)
    if count == 0:
        raise bad_dataset("dataset is empty")
    return JsonlSummary(num_records=count, fields=sorted(fields))


def _parse_line(raw: bytes, number: int) -> object:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_dataset(f"line {number}: not UTF-8 at byte {exc.start}") from exc
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad_dataset(
            f"line {number}: invalid JSON ({exc.msg}){_joined_hint(text, exc)}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # 5,000-digit integers, deep nesting
        raise bad_dataset(
            f"line {number}: invalid JSON ({type(exc).__name__}: {exc})"[:300]
        ) from exc
    for text_value in texts_of(record):
        if "\x00" in text_value:
            raise bad_dataset(f"line {number}: NUL character (\\u0000) in a string")
        try:
            text_value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise bad_dataset(
                f"line {number}: lone surrogate {text_value[exc.start]!r} in a string"
            ) from exc
    return record


STRIPPED_NEWLINES_HINT = (
    "; a second record starts on the same line, so the newlines between records were "
    "probably stripped: `curl -d @file` strips them, `curl --data-binary @file` and "
    "`grpo datasets upload FILE` keep them"
)


def _joined_hint(text: str, exc: json.JSONDecodeError) -> str:
    """What to do when one record follows another on the same line (`Extra data` before
    a `{`): the body lost its newlines on the way."""
    if exc.msg == "Extra data" and text[exc.pos :].lstrip().startswith(("{", "[")):
        return STRIPPED_NEWLINES_HINT
    return ""


def texts_of(value: object) -> Iterator[str]:
    """Every key and string in a parsed JSON value, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
