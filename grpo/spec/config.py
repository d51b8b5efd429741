"""The pydantic configuration every section of a JobSpec shares: unknown keys are errors,
values are frozen, attribute docstrings document the fields and NaN or infinity is refused."""

from __future__ import annotations

from pydantic import ConfigDict

SECTION_CONFIG = ConfigDict(
    extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
)
