"""How big and how deep an uploaded dataset may be, whatever its format: the limits the API
holds an upload to (app/settings.py names each as a GRPO_* setting, its field name here),
the error that names the one exceeded, and how deep a decoded JSON value nests. Standard
library only; knows nothing of HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass

SIZE_LIMITS = frozenset(
    {
        "max_dataset_record_bytes",
        "max_dataset_decoded_bytes",
        "max_dataset_column_chunk_bytes",
        "max_dataset_parquet_footer_bytes",
    }
)
"""The limits on bytes (a 413 at upload); the rest bound counts and depth (a 422)."""


@dataclass(frozen=True)
class DatasetLimits:
    """One field per setting of the same name (app/settings.py documents each)."""

    max_dataset_lines: int
    max_dataset_columns: int
    max_dataset_nesting: int
    max_dataset_record_bytes: int
    max_dataset_decoded_bytes: int
    max_dataset_column_chunk_bytes: int
    max_dataset_parquet_footer_bytes: int


class DatasetLimitError(ValueError):
    """A dataset past one of its limits; `limit` is the DatasetLimits field it exceeds (None:
    a shape no setting admits), and the message names what was found and the limit."""

    def __init__(self, limit: str | None, message: str) -> None:
        super().__init__(message)
        self.limit = limit

    @property
    def is_size(self) -> bool:
        return self.limit in SIZE_LIMITS


def json_nesting(value: object) -> int:
    """How many lists and objects a decoded JSON value nests, one inside another: 0 for
    text, numbers and null, 2 for a list of chat messages. Without recursion."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        else:
            continue
        deepest = max(deepest, depth + 1)
    return deepest
