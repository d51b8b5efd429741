"""Query, path and header parameters shared by routes, bounded so that the store never
gets a value its database cannot hold: integers fit their column and text has no
NUL character (PostgreSQL refuses it). A value out of bounds is a 422 naming the parameter.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Path, Query

MAX_INT = 2**63 - 1
"""Event ids are BIGINT: PostgreSQL and SQLite hold up to this."""
MAX_STEP = 2**31 - 1
"""Steps and group indices are INTEGER: PostgreSQL holds up to this."""
NO_NUL = r"^[^\x00]*$"

StepQuery = Annotated[int, Query(ge=0, le=MAX_STEP)]
StepPath = Annotated[int, Path(ge=0, le=MAX_STEP)]
AfterStepQuery = Annotated[
    int | None,
    Query(ge=0, le=MAX_STEP, description="only steps after this one; absent: all, step 0 too"),
]
EventIdHeader = Annotated[int, Header(ge=0, le=MAX_INT, description="resume after this event")]
EventIdQuery = Annotated[int, Query(ge=0, le=MAX_INT, description="same as Last-Event-ID")]
SearchQuery = Annotated[
    str | None, Query(max_length=200, pattern=NO_NUL, description="name contains (literally)")
]
MetricKeysQuery = Annotated[
    str | None, Query(max_length=2000, pattern=NO_NUL, description="comma-separated metric names")
]
NameQuery = Annotated[str, Query(min_length=1, max_length=200, pattern=NO_NUL)]
RunIdPath = Annotated[str, Path(max_length=32, pattern=NO_NUL)]
PromptIdPath = Annotated[str, Path(max_length=500, pattern=NO_NUL)]
