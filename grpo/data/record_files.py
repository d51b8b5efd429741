"""The records of a dataset file, one at a time, whatever its format: parquet (by its magic
bytes, a record batch at a time) or JSONL (a line at a time). For checks that scan a file
without loading it (does any prompt carry a system turn?). Standard library and pyarrow
only; knows nothing of HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grpo.data.parquet import is_parquet, parquet_records
from grpo.data.records import SYSTEM_PROMPT_CLASH


def file_records(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, decoded record) of every record; lines that are not JSON are skipped (the
    loader names them)."""
    if is_parquet(path):
        for i, row in enumerate(parquet_records(path), start=1):
            yield f"row {i}", row
        return
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if raw.strip():
                try:
                    yield f"line {number}", json.loads(raw)
                except ValueError:
                    continue


def system_prompt_clash(path: Path, prompt_field: str) -> str | None:
    """Why `data.system_prompt` cannot be added to this file's prompts (the first record
    whose prompt has its own system message), or None."""
    for where, record in file_records(path):
        prompt = record.get(prompt_field) if isinstance(record, dict) else None
        if isinstance(prompt, list) and any(
            isinstance(m, dict) and m.get("role") == "system" for m in prompt
        ):
            return SYSTEM_PROMPT_CLASH.format(where=where)
    return None
