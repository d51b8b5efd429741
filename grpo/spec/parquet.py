"""Reading a parquet dataset record by record, a batch of rows at a time, never whole.

pyarrow decodes one record batch (`BATCH_ROWS` rows) at a time from a buffered stream of
the file (`buffer_size`), so memory follows the batch, not the file, whatever its row
groups. Each row comes out as the dict a JSONL line would decode to (lists and structs as
Python lists and dicts), for grpo/spec/records.py. Imports neither torch nor pydantic: the
API checks uploads with it. Knows nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

PARQUET_MAGIC = b"PAR1"
"""The four bytes a parquet file starts (and ends) with."""
BATCH_ROWS = 1024
_BUFFER_BYTES = 1 << 20


def is_parquet(path: Path) -> bool:
    """Whether the file starts with the parquet magic bytes (whatever its name)."""
    with path.open("rb") as handle:
        return handle.read(4) == PARQUET_MAGIC


def parquet_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every row of the file in order, as a dict; ValueError when it is not parquet."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # a dependency of the project; absent only in odd installs
        raise ValueError("parquet datasets need the `pyarrow` package") from exc
    try:
        parquet = pq.ParquetFile(path, buffer_size=_BUFFER_BYTES, pre_buffer=False)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a bad file
        raise ValueError(f"{path.name}: not a readable parquet file ({exc})") from exc
    with parquet:
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
            yield from batch.to_pylist()


def parquet_columns(path: Path) -> list[str]:
    """The column names of a parquet file, from its footer alone."""
    import pyarrow.parquet as pq

    return list(pq.ParquetFile(path).schema_arrow.names)
