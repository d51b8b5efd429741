"""Checking an uploaded parquet dataset a record batch at a time (grpo/spec/parquet.py),
never holding it whole: every row a record as the trainer reads it (grpo/spec/records.py).
Every refusal names the row (1-based); strings may not hold NUL, which the store cannot
keep. Knows nothing of HTTP beyond the error it raises.
"""

from __future__ import annotations

from pathlib import Path

from app.api.checks.jsonl import JsonlSummary, bad_dataset, texts_of
from grpo.spec.parquet import parquet_records
from grpo.spec.records import RecordError, parse_record


def check_parquet_file(
    path: Path, *, prompt_field: str, answer_field: str | None, max_lines: int
) -> JsonlSummary:
    """The number of rows and the columns records have; a 422 naming the first bad row."""
    fields = {prompt_field} | ({answer_field} if answer_field else set())
    count = 0
    try:
        for number, row in enumerate(parquet_records(path), start=1):
            count += 1
            if count > max_lines:
                raise bad_dataset(
                    f"more than {max_lines} records; at most {max_lines} are accepted"
                )
            if any("\x00" in text for text in texts_of(row)):
                raise bad_dataset(f"row {number}: NUL character (\\u0000) in a string")
            try:
                parsed = parse_record(
                    row, prompt_field=prompt_field, answer_field=answer_field, where=f"row {number}"
                )
            except RecordError as exc:
                raise bad_dataset(str(exc)) from exc
            fields |= set(parsed.data)
    except (ValueError, OSError) as exc:  # pyarrow's errors about the file itself
        raise bad_dataset(f"not a readable parquet file: {exc}"[:500]) from exc
    if count == 0:
        raise bad_dataset("dataset is empty")
    return JsonlSummary(num_records=count, fields=sorted(fields))
