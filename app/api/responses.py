"""The error answers each route declares in the OpenAPI document, so that every status and
content type a client can get is in the schema (checked by Schemathesis in CI).

Bodies are the one error shape of app/api/errors.py.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class FieldError(BaseModel):
    loc: str
    message: str


class ErrorDetail(BaseModel):
    code: str
    message: str
    fields: list[FieldError] | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail


WHY = {
    400: "Malformed request: a Host this server does not answer to, a bad cursor",
    401: "A bearer token is required (GRPO_API_TOKENS is set)",
    403: "Invalid token, a role or a run's owner that this is not for, or a foreign Origin",
    404: "No such run, step, group or dataset",
    408: "The request body came too slowly (GRPO_BODY_TIMEOUT_SECONDS); the connection closes",
    409: "The run is not in a state that allows this",
    413: "The request body is larger than the server accepts",
    415: "The request body is not of the content type this route takes",
    422: "A field, query parameter or header is invalid; the error names it",
    429: "Too many reward tests or preflights are running on this server; retry shortly",
    503: "The database or the broker is not reachable (`database_unavailable`, Retry-After)",
    507: "No space left on the server's disk (`no_space`)",
}
EVERY_ROUTE = (400, 401, 403, 422, 503, 507)
WRITES = (408, 413, 415)


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for these error statuses."""
    return {status: {"model": ErrorOut, "description": WHY[status]} for status in statuses}


SSE_EVENT = {
    "type": "object",
    "description": "One Server-Sent Event; `data` is JSON (a step, a status, a log line)",
    "properties": {
        "id": {"type": "string", "description": "resume after it with Last-Event-ID"},
        "event": {"type": "string", "description": "step, eval, status, log or end"},
        "data": {"type": "string"},
        "retry": {"type": "integer"},
    },
}


def sse_body(description: str) -> dict[int | str, dict[str, Any]]:
    """A 200 that is a `text/event-stream`; the schema describes each event (OpenAPI 3.1)."""
    return {
        200: {"description": description, "content": {"text/event-stream": {"schema": SSE_EVENT}}}
    }


def text_body(description: str, *media_types: str) -> dict[int | str, dict[str, Any]]:
    """A 200 whose body is text, not JSON (an SSE stream, a CSV or JSONL file)."""
    content = {media_type: {"schema": {"type": "string"}} for media_type in media_types}
    return {200: {"description": description, "content": content}}
