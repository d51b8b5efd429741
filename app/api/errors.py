"""One JSON shape for every error: {"error": {"code", "message", "fields"?}}.

No stack traces or secrets reach a client; validation errors name each field's path.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from grpo.spec import JobSpec
from grpo.spec.hints import worded_errors

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, fields: list[dict[str, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.fields = status, code, message, fields


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def field_errors(
    errors: list[Any], *, drop_prefix: tuple[str, ...] = ("body",)
) -> list[dict[str, str]]:
    """One row per error naming its field's path, worded as grpo/spec/hints.py words a
    spec's errors (did you mean ..., TRL's name for it here, why a bound is there).
    Discriminated unions add the tag as a path element (rewards.0.accuracy.weight)."""
    return worded_errors(errors, JobSpec, drop=drop_prefix)


def validation_response(errors: list[Any]) -> JSONResponse:
    fields = field_errors(errors)
    summary = "; ".join(f"{f['loc']}: {f['message']}" for f in fields[:5])
    # a bad query parameter, header or path is no fault of the job spec
    outside = {"query", "header", "path", "cookie"}
    is_request = any(str((err.get("loc") or ("",))[0]) in outside for err in errors)
    what = "invalid request" if is_request else "invalid job spec"
    body = error_body("validation_error", f"{what}: {summary}", fields=fields)
    return JSONResponse(body, status_code=422)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette's 405 names only the first
    route's, and one path is often served by several routes: GET and POST /api/runs)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches({**request.scope, "method": "__none__"})
            if match != Match.NONE:
                methods |= route.methods
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        extra = {"fields": exc.fields} if exc.fields else {}
        return JSONResponse(error_body(exc.code, exc.message, **extra), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _request_invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response(list(exc.errors()))

    @app.exception_handler(ValidationError)
    async def _model_invalid(_: Request, exc: ValidationError) -> JSONResponse:
        return validation_response(list(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
        return JSONResponse(
            error_body(code, str(exc.detail)), status_code=exc.status_code, headers=headers
        )

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)
