"""Checking an uploaded JSONL dataset, line by line from a file, without holding it whole.

Lines end at `\\n` only: U+2028, U+0085 and other Unicode line breaks are valid inside JSON
strings. A line is read no further than GRPO_MAX_DATASET_RECORD_BYTES; its fields, and the
fields of all records together, number at most GRPO_MAX_DATASET_COLUMNS, and nest at most
GRPO_MAX_DATASET_NESTING deep (grpo/data/dataset_limits.py). Every refusal names the line.
Knows nothing of HTTP beyond the error it raises.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from app.api.errors import ApiError
from grpo.data.dataset_limits import DatasetLimitError, DatasetLimits, json_nesting
from grpo.data.records import RecordError, parse_record


@dataclass(frozen=True)
class JsonlSummary:
    num_records: int
    fields: list[str]


def bad_dataset(message: str) -> ApiError:
    return ApiError(422, "invalid_dataset", message)


def past_limit(exc: DatasetLimitError) -> ApiError:
    """A 413 for a limit on bytes, else a 422; the message names the setting."""
    setting = f" (GRPO_{exc.limit.upper()})" if exc.limit else ""
    if exc.is_size:
        return ApiError(413, "payload_too_large", f"dataset too large: {exc}{setting}")
    return bad_dataset(f"{exc}{setting}")


def check_jsonl_file(
    path: Path, *, prompt_field: str, answer_field: str | None, limits: DatasetLimits
) -> JsonlSummary:
    """Every non-blank line a record as the trainer reads it (grpo/data/records.py), of text the
    store and the tokenizer can take (no NUL, no lone surrogate), within `limits`; the fields
    records have."""
    fields = {prompt_field} | ({answer_field} if answer_field else set())
    count = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(_lines(handle, limits.max_dataset_record_bytes), 1):
            if not raw.strip():
                continue
            count += 1
            if count > limits.max_dataset_lines:
                raise past_limit(
                    DatasetLimitError(
                        "max_dataset_lines",
                        f"more than {limits.max_dataset_lines} records; at most "
                        f"{limits.max_dataset_lines} are accepted",
                    )
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
            if isinstance(record, dict):  # parse_record refused anything else
                _check_shape(record, fields, number, limits)
    if count == 0:
        raise bad_dataset("dataset is empty")
    return JsonlSummary(num_records=count, fields=sorted(fields))


def _lines(handle: BinaryIO, most: int) -> Iterator[bytes]:
    """The file's lines, each read no further than `most` bytes besides its newline; a
    413 naming the first longer one."""
    for number in itertools.count(1):
        raw = handle.readline(most + 1)
        if not raw:
            return
        if len(raw) > most and raw[-1:] != b"\n":
            raise past_limit(
                DatasetLimitError(
                    "max_dataset_record_bytes",
                    f"line {number} is longer than {most} bytes; at most {most} per record",
                )
            )
        yield raw


def _check_shape(
    record: dict[str, Any], fields: set[str], number: int, limits: DatasetLimits
) -> None:
    """A 422 when this record has too many fields, one too deeply nested, or when the
    records so far have too many fields together."""
    most = limits.max_dataset_columns
    found = None
    if len(record) > most:
        found = f"{len(record)} fields"
    elif len(fields) > most:
        found = f"the records so far have {len(fields)} distinct fields"
    if found is not None:
        message = f"line {number}: {found}; at most {most} are accepted"
        raise past_limit(DatasetLimitError("max_dataset_columns", message))
    for name, value in record.items():
        if (depth := json_nesting(value)) > limits.max_dataset_nesting:
            raise past_limit(
                DatasetLimitError(
                    "max_dataset_nesting",
                    f"line {number}: field {name!r} nests {depth} levels deep (lists and objects "
                    f"one inside another); at most {limits.max_dataset_nesting} are accepted",
                )
            )


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
