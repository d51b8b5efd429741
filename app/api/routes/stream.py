"""Live events of a run as Server-Sent Events: the database is the log, a feed fans it out.

A client that reconnects with Last-Event-ID gets every event after that id, once, in
order: history it missed is read from the database (or the feed's ring of recent frames),
then it joins the run's feed (run_feed.py), which reads each new event once for every
stream of the run in this process. A server restart loses nothing; a client that lags too
far behind is closed and resumes the same way. A final status ends the stream after its
last events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.api.deps import ReadAccess, RunDep, SettingsDep
from app.api.params import EventIdHeader, EventIdQuery
from app.api.responses import errors, sse_body
from app.api.run_feed import RunFeed, Subscriber, encode_frame, hub
from app.settings import Settings
from app.store import db, events

router = APIRouter(prefix="/api/runs", tags=["stream"], responses=errors(404))
KEEPALIVE_SECONDS = 15.0


async def event_stream(run_id: str, after_id: int, settings: Settings) -> AsyncIterator[bytes]:
    yield f"retry: {int(settings.stream_poll_seconds * 2000)}\n\n".encode()
    last = after_id
    while True:  # catch up from the database until the feed's ring holds the rest
        feed = hub.feed(
            run_id,
            poll_seconds=settings.stream_poll_seconds,
            queue_limit=settings.stream_queue_events,
        )
        await feed.is_ready.wait()
        if feed.covers(last):
            break
        ring_after = feed.ring_after
        page = await run_in_threadpool(db.read, events.events_after, run_id, last)
        if page:
            yield b"".join(encode_frame(*event) for event in page)
            last = page[-1][0]
        elif hub.feeds.get(run_id) is feed and feed.ring_after == ring_after:
            last = ring_after  # the feed read every event up to here before we found none
    frames, subscriber = feed.subscribe(last)
    if hub.is_closing:  # the server began to stop while this stream caught up
        subscriber.drop()
    try:
        if frames:
            yield b"".join(frame for _, frame in frames)
            last = frames[-1][0]
        async for chunk in _follow(feed, subscriber, last):
            yield chunk
    finally:
        feed.unsubscribe(subscriber)


async def _follow(feed: RunFeed, subscriber: Subscriber, last: int) -> AsyncIterator[bytes]:
    while True:
        batches = await subscriber.take(KEEPALIVE_SECONDS)
        if subscriber.is_dropped:
            return  # too far behind: a clean close, the client resumes with Last-Event-ID
        chunk = b"".join(frame for batch in batches for i, frame in batch if i > last)
        if batches:
            last = max(last, batches[-1][-1][0])
        if chunk:
            yield chunk
        elif not batches and not subscriber.is_ended:
            yield b": keepalive\n\n"
        if subscriber.is_ended:
            if feed.final_frame is not None:
                yield feed.final_frame
            return


@router.get(
    "/{run_id}/events",
    dependencies=[ReadAccess],
    response_class=StreamingResponse,
    responses=sse_body("Server-Sent Events: step, eval, diagnosis, status, log, end"),
)
async def stream_events(
    run: RunDep,
    settings: SettingsDep,
    last_event_id: EventIdHeader = 0,
    after: EventIdQuery = 0,
) -> StreamingResponse:
    """Steps, evaluations, the doctor's findings, status changes and log lines; resume with
    Last-Event-ID (no gaps, no repeats)."""
    start = last_event_id or after
    return StreamingResponse(
        event_stream(run.id, start, settings),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
