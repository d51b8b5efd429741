"""Shared route dependencies: bearer-token checks and loading a run or answering 404.

Those that do no I/O are `async def`: FastAPI would run a plain `def` in the thread pool,
a hop that costs more than the check itself on every request.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Annotated

from fastapi import Depends, Header
from starlette.concurrency import run_in_threadpool

from app.api.errors import ApiError
from app.api.params import RunIdPath
from app.settings import Settings, get_settings
from app.store import events, runs
from app.store.models import Run


async def current_settings() -> Settings:
    return get_settings()


SettingsDep = Annotated[Settings, Depends(current_settings)]


def check_token(settings: Settings, authorization: str | None) -> None:
    tokens = settings.token_list
    if not tokens:
        return
    if not authorization or not authorization.lower().startswith("bearer "):
        raise ApiError(401, "unauthorized", "missing bearer token (Authorization: Bearer …)")
    given = authorization[7:].strip().encode()
    # Compare against every token in constant time, so timing leaks neither which nor how much.
    matches = [hmac.compare_digest(given, t.encode()) for t in tokens]
    if not any(matches):
        raise ApiError(403, "forbidden", "invalid token")


async def require_write(
    settings: SettingsDep, authorization: Annotated[str | None, Header()] = None
) -> None:
    check_token(settings, authorization)


async def require_read(
    settings: SettingsDep, authorization: Annotated[str | None, Header()] = None
) -> None:
    if settings.read_requires_token:
        check_token(settings, authorization)


async def require_weights(
    settings: SettingsDep, authorization: Annotated[str | None, Header()] = None
) -> None:
    """Checkpoints are the valuable part: a token whenever tokens are configured, whatever
    GRPO_READ_REQUIRES_TOKEN says."""
    check_token(settings, authorization)


def load_run(run_id: RunIdPath) -> Run:
    run = runs.get_run(run_id)
    if run is None:
        raise ApiError(404, "not_found", f"run {run_id} not found")
    return run


_heads: dict[str, asyncio.Future[tuple[str | None, int]]] = {}


async def load_run_version(run_id: RunIdPath) -> int:
    """The run's newest event id (what its per-step bodies are cached by), or 404.

    Requests for one run that arrive while its head is being read share that read: a room
    reloading one page costs a few queries, not one per request."""
    head = _heads.get(run_id)
    if head is None:
        head = asyncio.ensure_future(run_in_threadpool(events.read_head, run_id))
        _heads[run_id] = head
        head.add_done_callback(lambda _: _heads.pop(run_id, None))
    status, newest = await asyncio.shield(head)
    if status is None:
        raise ApiError(404, "not_found", f"run {run_id} not found")
    return newest


WriteAccess = Depends(require_write)
ReadAccess = Depends(require_read)
WeightsAccess = Depends(require_weights)
RunDep = Annotated[Run, Depends(load_run)]
RunVersionDep = Annotated[int, Depends(load_run_version)]
