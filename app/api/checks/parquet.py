"""Checking an uploaded parquet dataset a record batch at a time (grpo/data/parquet.py),
never holding it whole: its footer's length, then its rows, columns, nesting and column
chunks' decompressed sizes from the footer, all before anything is decoded; then every row
a record as the trainer reads it (grpo/data/records.py), each row's and all rows' decoded
size counted before the row is expanded (grpo/data/parquet_shape.py). Every refusal names
the row (1-based) or the column; strings may not hold NUL, which the store cannot keep.
Knows nothing of HTTP beyond the error it raises.
"""

from __future__ import annotations

from pathlib import Path

from app.api.checks.jsonl import JsonlSummary, bad_dataset, past_limit, texts_of
from grpo.data.dataset_limits import DatasetLimitError, DatasetLimits
from grpo.data.parquet import parquet_records
from grpo.data.records import RecordError, parse_record


def check_parquet_file(
    path: Path, *, prompt_field: str, answer_field: str | None, limits: DatasetLimits
) -> JsonlSummary:
    """The number of rows and the columns records have; a 413 or 422 naming the limit
    exceeded, or a 422 naming the first bad row."""
    fields = {prompt_field} | ({answer_field} if answer_field else set())
    count = 0
    try:
        for number, row in enumerate(parquet_records(path, limits), start=1):
            count += 1
            if count > limits.max_dataset_lines:  # the footer said fewer
                raise bad_dataset(f"more than {limits.max_dataset_lines} records")
            if any("\x00" in text for text in texts_of(row)):
                raise bad_dataset(f"row {number}: NUL character (\\u0000) in a string")
            try:
                parsed = parse_record(
                    row, prompt_field=prompt_field, answer_field=answer_field, where=f"row {number}"
                )
            except RecordError as exc:
                raise bad_dataset(str(exc)) from exc
            fields |= set(parsed.data)
    except DatasetLimitError as exc:
        raise past_limit(exc) from exc
    except (ValueError, OSError) as exc:  # pyarrow's errors about the file itself
        raise bad_dataset(f"not a readable parquet file: {exc}"[:500]) from exc
    if count == 0:
        raise bad_dataset("dataset is empty")
    return JsonlSummary(num_records=count, fields=sorted(fields))
