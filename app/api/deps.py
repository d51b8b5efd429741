"""Shared route dependencies: the request's database session, bearer-token checks (who
is calling, and whether they own a run), and loading a run or answering 404.

Those that do no I/O are `async def`: FastAPI would run a plain `def` in the thread pool,
a hop that costs more than the check itself on every request.

This is where a request gets its session (`SessionDep`), as in the FastAPI full-stack
template; no other route module opens one (tests/project/test_import_rules.py checks).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header
from starlette.concurrency import run_in_threadpool

from app.api.errors import ApiError
from app.api.params import RunIdPath
from app.identity import OPEN, Identity
from app.settings import Settings, get_settings
from app.store import db, events, runs
from app.store.db import Session
from app.store.models import Run


async def current_settings() -> Settings:
    return get_settings()


SettingsDep = Annotated[Settings, Depends(current_settings)]


async def get_session() -> AsyncIterator[Session]:
    """The request's session. `async`, with no thread-pool hop: creating and closing a
    session does no I/O, since every store function it is handed ends its own transaction
    (app/store/db.py) and the connection goes back to the pool at each commit."""
    session = db.new_session()
    try:
        yield session
    finally:
        session.close()


# scope="function": closed when the route returns, before a streamed body is sent.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def check_token(settings: Settings, authorization: str | None) -> Identity:
    """The caller's identity (app/identity.py); 401 without a token, 403 with a wrong one."""
    pairs = settings.token_identities
    if not pairs:
        return OPEN
    if not authorization or not authorization.lower().startswith("bearer "):
        raise ApiError(401, "unauthorized", "missing bearer token (Authorization: Bearer …)")
    given = authorization[7:].strip().encode()
    # Compare against every token in constant time, so timing leaks neither which nor how much.
    matches = [hmac.compare_digest(given, token.encode()) for token, _ in pairs]
    if not any(matches):
        raise ApiError(403, "forbidden", "invalid token")
    return pairs[matches.index(True)][1]


async def require_write(
    settings: SettingsDep, authorization: Annotated[str | None, Header()] = None
) -> Identity:
    caller = check_token(settings, authorization)
    if not caller.can_write:
        raise ApiError(403, "forbidden", f"{caller.name} is a viewer: it may only read")
    return caller


async def require_read(
    settings: SettingsDep, authorization: Annotated[str | None, Header()] = None
) -> None:
    if settings.read_requires_token:
        check_token(settings, authorization)


async def require_token(
    settings: SettingsDep, authorization: Annotated[str | None, Header()] = None
) -> Identity:
    """Any valid token whenever tokens are configured, whatever GRPO_READ_REQUIRES_TOKEN
    says: for checkpoints (the valuable part) and for routes that store nothing but spend
    the server's work (a conversion)."""
    return check_token(settings, authorization)


def check_owner(caller: Identity, run: Run, action: str) -> None:
    """403 unless the caller submitted the run or is an admin."""
    if not caller.owns(run.submitted_by):
        owner = run.submitted_by or "an admin"
        raise ApiError(
            403, "forbidden", f"run {run.id} is {owner}'s: only its owner or an admin may {action}"
        )


def load_run(run_id: RunIdPath, session: SessionDep) -> Run:
    run = runs.get_run(session, run_id)
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
        head = asyncio.ensure_future(run_in_threadpool(db.read, events.read_head, run_id))
        _heads[run_id] = head
        head.add_done_callback(lambda _: _heads.pop(run_id, None))
    status, newest = await asyncio.shield(head)
    if status is None:
        raise ApiError(404, "not_found", f"run {run_id} not found")
    return newest


WriteAccess = Depends(require_write)
ReadAccess = Depends(require_read)
TokenAccess = Depends(require_token)
WeightsAccess = TokenAccess  # checkpoints
WriterDep = Annotated[Identity, Depends(require_write)]
WeightsReaderDep = Annotated[Identity, Depends(require_token)]
RunDep = Annotated[Run, Depends(load_run)]
RunVersionDep = Annotated[int, Depends(load_run_version)]
