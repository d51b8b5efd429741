"""Live events of a run as Server-Sent Events, read from the database.

The event table is the log: a client that reconnects with Last-Event-ID gets every event
after that id, once, in order. Nothing is pushed from memory, so a server restart loses
nothing either. A Redis wake-up (when the broker is Redis) ends the wait early; otherwise
the stream polls. A final status ends it after its last events.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.api.deps import ReadAccess, RunDep, SettingsDep
from app.store import events, runs
from app.store.models import FINAL_STATUSES
from app.store.wakeup import waker

router = APIRouter(prefix="/api/runs", tags=["stream"])
KEEPALIVE_SECONDS = 15.0


def format_sse(event_id: int, kind: str, payload: object) -> str:
    return f"id: {event_id}\nevent: {kind}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"


async def event_stream(run_id: str, after_id: int, poll_seconds: float) -> AsyncIterator[str]:
    yield f"retry: {int(poll_seconds * 2000)}\n\n"
    last_sent = time.monotonic()
    while True:
        batch = await run_in_threadpool(events.events_after, run_id, after_id)
        for event in batch:
            after_id = event.id
            yield format_sse(event.id, event.kind, event.payload)
            last_sent = time.monotonic()
        if batch:
            continue
        status = await run_in_threadpool(runs.get_status, run_id)
        if status is None or status in FINAL_STATUSES:
            # The final status may have been committed after the empty read above.
            for event in await run_in_threadpool(events.events_after, run_id, after_id):
                yield format_sse(event.id, event.kind, event.payload)
            final = {"status": status or "deleted"}
            yield f"event: end\ndata: {json.dumps(final)}\n\n"
            return
        if time.monotonic() - last_sent > KEEPALIVE_SECONDS:
            yield ": keepalive\n\n"
            last_sent = time.monotonic()
        await waker.wait(run_id, poll_seconds)


@router.get("/{run_id}/events", dependencies=[ReadAccess])
async def stream_events(
    run: RunDep,
    settings: SettingsDep,
    last_event_id: Annotated[int | None, Header(ge=0)] = None,
    after: Annotated[int | None, Query(ge=0, description="same as Last-Event-ID")] = None,
) -> StreamingResponse:
    """Steps, status changes and log lines; resume with Last-Event-ID (no gaps, no repeats)."""
    start = last_event_id if last_event_id is not None else (after or 0)
    return StreamingResponse(
        event_stream(run.id, start, settings.stream_poll_seconds),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
