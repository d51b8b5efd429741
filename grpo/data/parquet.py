"""Reading a parquet dataset record by record, a batch of rows at a time, never whole.

pyarrow decodes one record batch (`BATCH_ROWS` rows) at a time from a buffered stream of
the file (`buffer_size`), its text columns kept as dictionaries (grpo/data/parquet_shape.py):
a value stored once for many rows stays one value in arrow. Each batch's rows are sized
(`row_sizes`) before any is expanded, then turned into Python a slice of at most
`SLICE_BYTES` at a time, so memory follows the slice, not the file, whatever its row groups
and encodings. Each row comes out as the dict a JSONL line would decode to (lists and
structs as Python lists and dicts), for grpo/data/records.py. Given limits (an upload),
the footer's length and then its metadata are checked before anything is decoded, and
every row and the running total as they are decoded. Imports neither torch nor pydantic:
the API checks uploads with it. Knows nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grpo.data.dataset_limits import DatasetLimitError, DatasetLimits

PARQUET_MAGIC = b"PAR1"
"""The four bytes a parquet file starts (and ends) with."""
BATCH_ROWS = 1024
"""Most rows turned into Python objects at once."""
BATCH_VALUES = 1 << 18
MAX_BATCH_ROWS = 65536
"""A batch in arrow holds BATCH_VALUES // columns rows, BATCH_ROWS to MAX_BATCH_ROWS: its
dictionaries are built once a batch, its fixed-width values are BATCH_VALUES at most."""
SLICE_BYTES = 16 << 20
"""Most decoded bytes (as `row_sizes` counts them) turned into Python objects at once; a
row larger than this is turned alone."""
_BUFFER_BYTES = 1 << 20


def is_parquet(path: Path) -> bool:
    """Whether the file starts with the parquet magic bytes (whatever its name)."""
    with path.open("rb") as handle:
        return handle.read(4) == PARQUET_MAGIC


def parquet_records(path: Path, limits: DatasetLimits | None = None) -> Iterator[dict[str, Any]]:
    """Every row of the file in order, as a dict; ValueError when it is not parquet, and
    DatasetLimitError (a ValueError) at the first of `limits` it exceeds."""
    try:
        import pyarrow as pa

        from grpo.data import parquet_shape as shape
    except ImportError as exc:  # a dependency of the project; absent only in odd installs
        raise ValueError("parquet datasets need the `pyarrow` package") from exc
    if limits is not None:
        shape.check_footer_length(path, limits)
    metadata = _open(path, limits).metadata
    if limits is not None:
        shape.check_metadata(metadata, limits)
    dictionaries = _dictionaries_needed(path, limits, metadata)
    parquet = _open(path, limits, metadata, dictionaries)
    rows = BATCH_ROWS
    if dictionaries:  # dictionaries are built anew each batch: fewer, larger batches
        rows = max(BATCH_ROWS, min(MAX_BATCH_ROWS, BATCH_VALUES // metadata.num_columns))
    with parquet:
        decoded, first_row = 0, 1
        for batch in _batches(parquet, rows):
            sizes = shape.row_sizes(batch)
            if limits is not None:
                decoded = _check_sizes(sizes, first_row, decoded, limits)
            plain = shape.without_dictionaries(batch.schema)
            for start, stop in _slices(sizes.tolist(), SLICE_BYTES, BATCH_ROWS):
                part = batch.slice(start, stop - start)
                columns = [c.cast(f.type) for c, f in zip(part.columns, plain, strict=True)]
                yield from pa.RecordBatch.from_arrays(columns, schema=plain).to_pylist()
            first_row += batch.num_rows


def _dictionaries_needed(path: Path, limits: DatasetLimits | None, metadata: Any) -> list[int]:
    """The text columns to read as dictionaries: all of them when a dictionary holds a
    value that BATCH_ROWS rows would expand past SLICE_BYTES (a row group's first row, read
    with dictionaries, shows them), else none (faster, and pyarrow's pool stays smaller)."""
    import pyarrow as pa

    from grpo.data import parquet_shape as shape

    text = shape.dictionary_columns(metadata)
    if not text:
        return []
    pool = pa.default_memory_pool()
    with _open(path, limits, metadata, text) as probe:
        for group in range(metadata.num_row_groups):
            batches = probe.iter_batches(batch_size=1, row_groups=[group], use_threads=False)
            first = next(batches, None)
            del batches  # its reader's buffers, before the next row group's
            pool.release_unused()
            if (
                first is not None
                and shape.largest_dictionary_value(first) * BATCH_ROWS > SLICE_BYTES
            ):
                return text
    return []


def _batches(parquet: Any, rows: int) -> Iterator[Any]:
    """The file's record batches, a row group at a time: a batch across two row groups
    holds two dictionaries, which pyarrow cannot give for a nested column."""
    for group in range(parquet.metadata.num_row_groups):
        yield from parquet.iter_batches(batch_size=rows, row_groups=[group], use_threads=False)


def _open(
    path: Path,
    limits: DatasetLimits | None,
    metadata: Any = None,
    dictionary_columns: list[int] | None = None,
) -> Any:
    """The file's reader (its footer parsed at most once: pass the metadata back in); its
    thrift strings and lists no longer than the footer may be, given limits."""
    import pyarrow.parquet as pq

    bounds = {}
    if limits is not None:
        most = limits.max_dataset_parquet_footer_bytes
        bounds = {"thrift_string_size_limit": most, "thrift_container_size_limit": most}
    try:
        return pq.ParquetFile(
            path,
            metadata=metadata,
            read_dictionary=dictionary_columns,
            buffer_size=_BUFFER_BYTES,
            pre_buffer=False,
            **bounds,
        )
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a bad file
        raise ValueError(f"{path.name}: not a readable parquet file ({exc})") from exc


def _check_sizes(sizes: Any, first_row: int, decoded: int, limits: DatasetLimits) -> int:
    """The running total of decoded bytes with this batch's rows; DatasetLimitError at the
    first row past max_dataset_record_bytes, or once the total passes
    max_dataset_decoded_bytes."""
    most_row, most_total = limits.max_dataset_record_bytes, limits.max_dataset_decoded_bytes
    over = (sizes > most_row).nonzero()[0]
    if len(over):
        index = int(over[0])
        raise DatasetLimitError(
            "max_dataset_record_bytes",
            f"row {first_row + index} decodes to {int(sizes[index])} bytes; at most "
            f"{most_row} per record",
        )
    decoded += int(sizes.sum())
    if decoded > most_total:
        raise DatasetLimitError(
            "max_dataset_decoded_bytes",
            f"the rows up to row {first_row + len(sizes) - 1} decode to {decoded} bytes; "
            f"at most {most_total} are accepted (a dictionary-encoded column counts each "
            "row's value)",
        )
    return decoded


def _slices(sizes: list[int], budget: int, most_rows: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of at most `most_rows` consecutive rows adding up to at most `budget`
    bytes (one row at least)."""
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (total + size > budget or i - start == most_rows):
            yield start, i
            start, total = i, 0
        total += size
    if start < len(sizes):
        yield start, len(sizes)


def parquet_columns(path: Path) -> list[str]:
    """The column names of a parquet file, from its footer alone."""
    import pyarrow.parquet as pq

    return list(pq.ParquetFile(path).schema_arrow.names)
