"""The route class of POST /api/runs, whose body is a JobSpec: a body the JobSpec's rules
refuse is answered with this server's refusals of the rest of it too, in one 422
(app/api/checks/problems.py). FastAPI validates a body before the route runs and answers
with pydantic's errors alone, so a TRL field name used to hide an uninstalled reward
function until it was fixed (issue 44). Errors of a header or query parameter are answered
as on every route."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from app.api.checks.problems import spec_problems
from app.api.checks.refusal import refuse
from app.api.deps import get_session
from app.settings import get_settings


class SpecBodyRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handle(request)
            except RequestValidationError as exc:
                # a body that is no JSON object, or a header's error too: the usual answer
                is_spec = isinstance(exc.body, dict)
                if not is_spec or any(tuple(e["loc"])[:1] != ("body",) for e in exc.errors()):
                    raise
                async with asynccontextmanager(get_session)() as session:  # as a request's
                    problems = await run_in_threadpool(
                        spec_problems, exc.body, get_settings(), session
                    )
                refuse(problems)
                raise  # the JobSpec's rules refused what they now accept: never expected

        return answer
