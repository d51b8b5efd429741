"""What a parquet file holds, known before it is decoded, and what each row decodes to.

Before decoding: the footer's length (from the file's last eight bytes, before it is
parsed), then from the parsed footer the number of rows and leaf columns, how deep each
column's type nests, and each column chunk's decompressed size (its pages' uncompressed
size, or its values times their width when they are of fixed width). None of these bounds
a dictionary-encoded column: its one stored value may stand for every row. So the reader
(grpo/data/parquet.py) keeps text columns as dictionaries while a batch is in arrow, and
`row_sizes` counts what each row would decode to, before a single Python string is made.
Imports neither torch nor pydantic; knows nothing of HTTP.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from grpo.data.dataset_limits import DatasetLimitError, DatasetLimits

VALUE_BYTES = 8
"""Bytes a value counts besides its own text (as a JSON line would spend on punctuation):
a list of many empty values is not free."""
UNBOUNDED_ENCODINGS = frozenset({"DELTA_BYTE_ARRAY"})
"""Encodings whose values each repeat part of the one before: one page can decode to many
times its size, and pyarrow decodes a page's values at once."""
_NO_DICTIONARY_ENCODINGS = frozenset({"DELTA_BYTE_ARRAY", "DELTA_LENGTH_BYTE_ARRAY"})
"""Encodings pyarrow cannot read into a dictionary (it raises "not yet implemented")."""
_TEXT_TYPES = frozenset({"STRING", "NONE", "JSON", "BSON", "ENUM"})
_BINARY_TYPES = (pa.string(), pa.binary(), pa.large_string(), pa.large_binary())


def footer_bytes(path: Path) -> int:
    """The length of the file's footer, from its last eight bytes, without parsing it;
    ValueError when the file is too short to have one."""
    with path.open("rb") as handle:
        handle.seek(0, 2)
        if handle.tell() < 12:
            raise ValueError(f"{path.name}: not a readable parquet file (too short)")
        handle.seek(-8, 2)
        length, magic = struct.unpack("<i4s", handle.read(8))
    if magic != b"PAR1" or length < 0:
        raise ValueError(f"{path.name}: not a readable parquet file (no footer)")
    return int(length)


def check_footer_length(path: Path, limits: DatasetLimits) -> None:
    limit = limits.max_dataset_parquet_footer_bytes
    if (length := footer_bytes(path)) > limit:
        raise DatasetLimitError(
            "max_dataset_parquet_footer_bytes",
            f"parquet footer (schema and row-group metadata) is {length} bytes; at most "
            f"{limit} are read (fewer columns or fewer, larger row groups)",
        )


def check_metadata(metadata: pq.FileMetaData, limits: DatasetLimits) -> None:
    """Rows, columns, nesting and decompressed sizes within `limits`, from the footer alone."""
    if metadata.num_rows > limits.max_dataset_lines:
        raise DatasetLimitError(
            "max_dataset_lines",
            f"{metadata.num_rows} rows; at most {limits.max_dataset_lines} records are accepted",
        )
    if metadata.num_columns > limits.max_dataset_columns:
        raise DatasetLimitError(
            "max_dataset_columns",
            f"{metadata.num_columns} columns (each field of a struct counts); at most "
            f"{limits.max_dataset_columns} are accepted",
        )
    schema = metadata.schema.to_arrow_schema()
    for field in schema:
        if (depth := type_nesting(field.type)) > limits.max_dataset_nesting:
            raise DatasetLimitError(
                "max_dataset_nesting",
                f"column {field.name!r} nests {depth} levels deep (lists and structs one "
                f"inside another); at most {limits.max_dataset_nesting} are accepted",
            )
    _check_chunks(metadata, limits)


def _check_chunks(metadata: pq.FileMetaData, limits: DatasetLimits) -> None:
    chunk_limit, total_limit = (
        limits.max_dataset_column_chunk_bytes,
        limits.max_dataset_decoded_bytes,
    )
    widths = [_value_width(metadata.schema.column(i)) for i in range(metadata.num_columns)]
    total = 0
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            where = f"column {chunk.path_in_schema!r} in row group {g + 1}"
            if unbounded := UNBOUNDED_ENCODINGS.intersection(chunk.encodings):
                raise DatasetLimitError(
                    None,
                    f"{where} is {min(unbounded)}-encoded, whose decoded size the file does "
                    "not bound; write it with PLAIN or dictionary encoding (pyarrow's default)",
                )
            size = max(chunk.total_uncompressed_size, chunk.num_values * widths[c])
            if size > chunk_limit:
                raise DatasetLimitError(
                    "max_dataset_column_chunk_bytes",
                    f"{where} decompresses to {size} bytes; at most {chunk_limit} per column "
                    "chunk (write the file in smaller row groups)",
                )
            total += size
    if total > total_limit:
        raise DatasetLimitError(
            "max_dataset_decoded_bytes",
            f"the file's columns decompress to {total} bytes; at most {total_limit} are accepted",
        )


def _value_width(column: pq.ColumnSchema) -> int:
    """Bytes one value of a leaf column takes once decoded, at the least."""
    widths = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}
    if column.physical_type == "FIXED_LEN_BYTE_ARRAY":
        return max(1, int(column.length))
    return widths.get(column.physical_type, 4)  # BYTE_ARRAY: an offset, besides its bytes


def type_nesting(data_type: pa.DataType) -> int:
    """How many lists, maps and structs a type nests, one inside another (0 for text and
    numbers, 2 for a list of chat-message structs). Without recursion."""
    deepest = 0
    stack = [(data_type, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, pa.DictionaryType):
            stack.append((item.value_type, depth))
            continue
        if item.num_fields == 0:
            continue
        deepest = max(deepest, depth + 1)
        if isinstance(item, pa.MapType):
            stack.extend([(item.key_type, depth + 1), (item.item_type, depth + 1)])
        else:
            stack.extend((item.field(i).type, depth + 1) for i in range(item.num_fields))
    return deepest


def dictionary_columns(metadata: pq.FileMetaData) -> list[int]:
    """The text leaf columns pyarrow can read as dictionaries (no DELTA_* encoded chunk):
    read so, a dictionary page stays one value per distinct value, however many rows."""
    leaves = []
    for c in range(metadata.num_columns):
        column = metadata.schema.column(c)
        if column.physical_type != "BYTE_ARRAY":
            continue
        if column.logical_type.type not in _TEXT_TYPES:  # e.g. DECIMAL: not text
            continue
        encodings = (
            metadata.row_group(g).column(c).encodings for g in range(metadata.num_row_groups)
        )
        if not any(_NO_DICTIONARY_ENCODINGS.intersection(e) for e in encodings):
            leaves.append(c)
    return leaves


def largest_dictionary_value(batch: pa.RecordBatch) -> int:
    """The longest value (bytes) of any text dictionary in the batch, at any depth: read as
    dictionaries, a row group's first row carries its columns' whole dictionary pages."""
    largest = 0
    stack: list[pa.Array] = list(batch.columns)
    while stack:
        array = stack.pop()
        data_type = array.type
        if isinstance(data_type, pa.DictionaryType):
            if len(array.dictionary) and data_type.value_type in _BINARY_TYPES:
                largest = max(largest, int(text_lengths(array.dictionary).max()))
        elif isinstance(data_type, pa.StructType):
            stack.extend(array.field(i) for i in range(data_type.num_fields))
        elif isinstance(data_type, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
            stack.append(array.values)  # a map is a list of key-value structs
    return int(largest)


def without_dictionaries(schema: pa.Schema) -> pa.Schema:
    """The schema with each dictionary type (at any depth) replaced by its value type."""
    return pa.schema([field.with_type(_plain(field.type)) for field in schema])


def _plain(data_type: pa.DataType) -> pa.DataType:
    if isinstance(data_type, pa.DictionaryType):
        return _plain(data_type.value_type)
    if isinstance(data_type, pa.MapType):
        key, item = data_type.key_field, data_type.item_field
        return pa.map_(key.with_type(_plain(key.type)), item.with_type(_plain(item.type)))
    if isinstance(data_type, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
        field = data_type.value_field.with_type(_plain(data_type.value_type))
        if isinstance(data_type, pa.FixedSizeListType):
            return pa.list_(field, data_type.list_size)
        return pa.large_list(field) if isinstance(data_type, pa.LargeListType) else pa.list_(field)
    if isinstance(data_type, pa.StructType):
        fields = [data_type.field(i) for i in range(data_type.num_fields)]
        return pa.struct([f.with_type(_plain(f.type)) for f in fields])
    return data_type


def row_sizes(batch: pa.RecordBatch) -> np.ndarray[Any, np.dtype[np.int64]]:
    """What each row decodes to, in bytes: its text and binary values' lengths, each fixed
    width value's width, and VALUE_BYTES a value; dictionaries counted per row, from
    their lengths alone (nothing expanded)."""
    sizes = np.zeros(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        sizes += value_sizes(column)
    return sizes


def value_sizes(array: pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Bytes each element of `array` decodes to (VALUE_BYTES for a null), as row_sizes
    counts them; slices are honoured. Numpy on arrow's buffers, no compute kernel (their
    first use costs the process tens of MB). Recursion follows the type's nesting,
    bounded before decoding."""
    data_type = array.type
    if isinstance(data_type, pa.DictionaryType):
        by_index = value_sizes(array.dictionary) - VALUE_BYTES
        indices = _values(array.indices).astype(np.int64)
        own = by_index[np.clip(indices, 0, max(0, len(by_index) - 1))] if len(by_index) else 0
    elif isinstance(data_type, (pa.ListType, pa.LargeListType, pa.MapType)):
        own = _list_sizes(array)
    elif isinstance(data_type, pa.FixedSizeListType):
        size = data_type.list_size
        inner = value_sizes(array.values.slice(array.offset * size, len(array) * size))
        own = inner.reshape(len(array), size).sum(axis=1) if size else 0
    elif isinstance(data_type, pa.StructType):
        own = np.zeros(len(array), dtype=np.int64)
        for child in array.flatten():
            own += value_sizes(child)
    elif data_type in _BINARY_TYPES:
        own = text_lengths(array)
    else:
        own = _fixed_width(data_type)
    sizes = np.zeros(len(array), dtype=np.int64) + own + VALUE_BYTES
    return np.where(_validity(array), sizes, VALUE_BYTES)


def text_lengths(array: pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Each value's length in bytes of a string or binary array (from its offsets)."""
    wide = array.type in (pa.large_string(), pa.large_binary())
    buffer = array.buffers()[1]
    offsets = np.frombuffer(buffer, dtype=np.int64 if wide else np.int32)
    own = offsets[array.offset : array.offset + len(array) + 1]
    return np.diff(own).astype(np.int64)


def _values(array: pa.Array) -> np.ndarray[Any, Any]:
    """A fixed-width array's values (null slots hold anything), as numpy, slice honoured."""
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset : array.offset + len(array)]


def _validity(array: pa.Array) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Which elements are not null, from the validity bitmap (slice honoured)."""
    if array.type == pa.null():
        return np.zeros(len(array), dtype=bool)
    bitmap = array.buffers()[0]
    if bitmap is None:
        return np.ones(len(array), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[array.offset : array.offset + len(array)].astype(bool)


def _list_sizes(array: pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Each list's (or map's) elements' sizes summed, from its offsets: a slice's offsets
    are its own, its values the whole child's."""
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    inner = value_sizes(array.values.slice(start, end - start))
    running = np.concatenate([[0], np.cumsum(inner)])
    return running[offsets[1:] - start] - running[offsets[:-1] - start]  # type: ignore[no-any-return]


def _fixed_width(data_type: pa.DataType) -> int:
    try:
        return max(0, int(data_type.bit_width) // 8)
    except ValueError:  # not a fixed-width type (null, or one parquet does not give)
        return 0
