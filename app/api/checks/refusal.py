"""A refused spec's problems, each naming its field, and the one 422 that lists them all.

Every check of a spec finds all of its problems rather than stopping at the first, and
submit and clone answer with every problem the spec has (app/api/checks/problems.py).
"""

from __future__ import annotations

from app.api.errors import ApiError

Problem = dict[str, str]
"""{"loc": the field's dotted path, "message": what is wrong with it}, as a 422's `fields`."""


def problem(loc: str, message: str) -> Problem:
    return {"loc": loc, "message": message}


def refuse(problems: list[Problem]) -> None:
    """A 422 listing every problem (the message names the first five); nothing when none."""
    if problems:
        summary = "; ".join(f"{p['loc']}: {p['message']}" for p in problems[:5])
        raise ApiError(422, "validation_error", f"invalid job spec: {summary}", problems)
