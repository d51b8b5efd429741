"""The pydantic configuration every section of a JobSpec shares: unknown keys are errors,
values are frozen, attribute docstrings document the fields and NaN or infinity is refused;
and the type of its integer fields, which takes numbers only."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict
from pydantic_core import PydanticCustomError

SECTION_CONFIG = ConfigDict(
    extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
)


def _number_only(value: Any) -> Any:
    """pydantic's lax int took `true` as 1 and `"2"` as 2; a count is written as a number.
    A float without a fraction (2.0) is still one, as JSON Schema's `integer` says."""
    if isinstance(value, bool):
        raise PydanticCustomError(
            "int_type", "Input should be an integer, not {value}", {"value": str(value).lower()}
        )
    if isinstance(value, str | bytes | bytearray):
        raise PydanticCustomError(
            "int_type", "Input should be an integer, not a string: write {value} without quotes",
            {"value": repr(value)[:40]},
        )  # fmt: skip
    return value


SpecInt = Annotated[int, BeforeValidator(_number_only)]
"""The type of a spec's integer fields: a number with no fraction; true/false and numeric
strings are refused (pydantic's lax int takes both). Bounds go in each field's Field."""
OptionalSpecInt = Annotated[int | None, BeforeValidator(_number_only)]
"""SpecInt or None (one type around the union: inside it, pydantic's JSON schema loses the
field's bounds)."""
