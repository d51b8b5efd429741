"""Outages are answers, not crashes: a database that cannot be reached is a 503
`database_unavailable` with Retry-After, a full disk a 507 `no_space` ("no space left").

Registered as exception handlers for the exception classes themselves, so Starlette's
ExceptionMiddleware answers them and the keep-alive connection stays open (a handler for
`Exception` runs in ServerErrorMiddleware, which re-raises and drops the connection).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.api.errors import error_body
from app.store.outage import UNREACHABLE, is_disk_full, is_unreachable

log = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5


def outage_response(exc: Exception) -> JSONResponse:
    """The answer for a store or disk error; a plain 500 for any other."""
    if is_disk_full(exc):
        log.warning("no space left: %s", exc)
        message = "no space left on the server's disk; retry once space is freed"
        return JSONResponse(
            error_body("no_space", message),
            status_code=507,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS * 12)},
        )
    if is_unreachable(exc):
        log.warning("database unavailable: %s", type(exc).__name__)
        message = "the database cannot be reached; retry shortly"
        return JSONResponse(
            error_body("database_unavailable", message),
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    log.exception("unhandled error", exc_info=exc)
    return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)


def install_outage_handlers(app: FastAPI) -> None:
    async def handle(_: Request, exc: Exception) -> JSONResponse:
        return outage_response(exc)

    for kind in (*UNREACHABLE, OSError):
        app.add_exception_handler(kind, handle)
