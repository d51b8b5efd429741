"""Free-form JSON in a JobSpec (a tool's `parameters` schema, and any such field to come):
the one rule on how deep and how large it may be, and that it is JSON at all.

Without it, a few hundred levels of nesting passed validation and then broke whatever
walked the value next (pydantic's serializer stops at its depth limit, json.dumps and the
store's encoders at Python's recursion limit). The check walks the value with a stack of
its own, never recursing, so any depth is refused in microseconds; pydantic applies it at
submit (the `JsonObject` type of every such field) and the worker again when it reads the
stored spec. Standard library and pydantic only.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import AfterValidator

JSON_MAX_DEPTH = 32
"""Levels of objects and arrays, the outermost one included: a tool's JSON schema needs a
handful."""
JSON_MAX_CHARS = 100_000
"""Characters of the value written as compact JSON."""


def json_value_problem(value: object) -> str | None:
    """Why `value` is not a JSON value within the bounds above; None when it is."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > JSON_MAX_DEPTH:
                return f"nested deeper than {JSON_MAX_DEPTH} levels of objects and arrays"
            if isinstance(item, dict):
                if not all(isinstance(key, str) for key in item):
                    return "object keys must be strings"
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{item} is not a JSON number"
        elif item is not None and not isinstance(item, str | int | float):
            return f"a {type(item).__name__} is not a JSON value"
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    if size > JSON_MAX_CHARS:
        return f"{size} characters as JSON, over the limit of {JSON_MAX_CHARS}"
    return None


def check_json_value(value: Any) -> Any:
    """The value, once it is JSON within the bounds (ValueError otherwise)."""
    if (problem := json_value_problem(value)) is not None:
        raise ValueError(problem)
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(check_json_value)]
"""The type of every free-form JSON object field of a spec."""
