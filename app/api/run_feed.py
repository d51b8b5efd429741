"""One reader per watched run in this process, fanned out to every open stream of the run.

The database stays the log; a feed only spares each stream its own reads and encodings.
A feed reads the run's new events once (when woken, polling only as the fallback),
encodes each as a Server-Sent Event once, keeps the newest frames in a ring for streams
that (re)connect near the head, and puts each batch on every subscriber's bounded queue.
A subscriber that falls too far behind is cut off (its response ends cleanly and the
client resumes with Last-Event-ID); the feed never waits for a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque

from starlette.concurrency import run_in_threadpool

from app.store import db, events
from app.store.models import FINAL_STATUSES
from app.store.wakeup import waker

log = logging.getLogger(__name__)
Frame = tuple[int, bytes]
"""(event id, its encoded `id:/event:/data:` block)."""
READ_LIMIT = 500
RING_FRAMES = 1024
LINGER_SECONDS = 10.0
"""How long a feed nobody watches keeps reading, so a reconnecting client finds its ring."""
SAFETY_POLL_SECONDS = 5.0
"""With a live wake-up, how often a feed reads anyway (a wake-up may be lost)."""


def encode_frame(event_id: int, kind: str, payload_json: str) -> bytes:
    # A raw newline in JSON text is whitespace between tokens; SSE data must be one line.
    data = payload_json.replace("\n", " ") if "\n" in payload_json else payload_json
    return f"id: {event_id}\nevent: {kind}\ndata: {data}\n\n".encode()


def end_frame(status: str | None) -> bytes:
    return f"event: end\ndata: {json.dumps({'status': status or 'deleted'})}\n\n".encode()


class Subscriber:
    """One open stream's queue of batches, bounded by the number of events waiting."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.batches: deque[tuple[Frame, ...]] = deque()
        self.pending = 0
        self.is_dropped = False
        self.is_ended = False
        self.has_news = asyncio.Event()

    def offer(self, batch: tuple[Frame, ...]) -> bool:
        """Queue a batch; False (and the stream is to close) when the client lags too far."""
        if self.pending + len(batch) > self.limit:
            self.drop()
        else:
            self.batches.append(batch)
            self.pending += len(batch)
            self.has_news.set()
        return not self.is_dropped

    def end(self) -> None:
        self.is_ended = True
        self.has_news.set()

    def drop(self) -> None:
        """Close the stream at once; its client resumes with Last-Event-ID."""
        self.is_dropped = True
        self.has_news.set()

    async def take(self, timeout: float) -> list[tuple[Frame, ...]]:
        """Every batch waiting, after waiting up to timeout for one ([] when none came)."""
        if not self.batches and not self.is_dropped and not self.is_ended:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.has_news.wait()
        self.has_news.clear()
        taken = list(self.batches)
        self.batches.clear()
        self.pending = 0
        return taken


class RunFeed:
    """The reader of one run: its cursor, its ring of recent frames, its subscribers."""

    def __init__(self, run_id: str, *, poll_seconds: float, queue_limit: int) -> None:
        self.run_id = run_id
        self.poll_seconds, self.queue_limit = poll_seconds, queue_limit
        self.subscribers: set[Subscriber] = set()
        self.ring: deque[Frame] = deque(maxlen=RING_FRAMES)
        self.ring_after = 0
        """Every event of the run after this id that the feed has read is in the ring."""
        self.cursor = 0
        self.final_frame: bytes | None = None
        self.is_ready = asyncio.Event()
        self.is_done = False
        self.task: asyncio.Task[None] | None = None

    def covers(self, after_id: int) -> bool:
        return self.is_ready.is_set() and after_id >= self.ring_after

    def subscribe(self, after_id: int) -> tuple[list[Frame], Subscriber]:
        """The ring's frames after after_id and a queue for what follows (needs covers())."""
        subscriber = Subscriber(self.queue_limit)
        if self.is_done:
            subscriber.end()
        else:
            self.subscribers.add(subscriber)
        return [frame for frame in self.ring if frame[0] > after_id], subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)

    async def run(self) -> None:
        woken = waker.subscribe(self.run_id)
        try:
            await waker.start()
            _status, self.cursor = await run_in_threadpool(db.read, events.read_head, self.run_id)
            self.ring_after = self.cursor
            self.is_ready.set()
            await self._follow(woken)
        finally:
            waker.unsubscribe(self.run_id, woken)
            self.is_done = True
            self.is_ready.set()  # a feed that failed before its first read still answers
            for subscriber in self.subscribers:
                subscriber.end()
            self.subscribers.clear()

    async def _follow(self, woken: asyncio.Event) -> None:
        idle_since = time.monotonic()
        while self.subscribers or time.monotonic() - idle_since < LINGER_SECONDS:
            if self.subscribers:
                idle_since = time.monotonic()
            woken.clear()  # set again by a wake-up that lands while we read
            try:
                status, news = await run_in_threadpool(
                    db.read, events.read_news, self.run_id, self.cursor
                )
            except Exception:  # noqa: BLE001 - a database hiccup must not end every stream
                log.warning("reading run %s's events failed; retrying", self.run_id, exc_info=True)
                await asyncio.sleep(self.poll_seconds)
                continue
            self._publish(news)
            if len(news) == READ_LIMIT:
                continue
            if status is None or status in FINAL_STATUSES:
                self.final_frame = end_frame(status)
                return
            waker.ensure_listening()
            is_live = waker.is_live
            timeout = max(SAFETY_POLL_SECONDS, self.poll_seconds) if is_live else self.poll_seconds
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await woken.wait()

    def _publish(self, news: list[events.RawEvent]) -> None:
        if not news:
            return
        batch = tuple((i, encode_frame(i, kind, payload)) for i, kind, payload in news)
        for frame in batch:
            if len(self.ring) == self.ring.maxlen:
                self.ring_after = self.ring[0][0]
            self.ring.append(frame)
        self.cursor = batch[-1][0]
        for subscriber in list(self.subscribers):
            if not subscriber.offer(batch):
                self.subscribers.discard(subscriber)


class FeedHub:
    """This process's feeds, one per watched run, started on the first subscriber."""

    def __init__(self) -> None:
        self.feeds: dict[str, RunFeed] = {}
        self.is_closing = False
        """Set as the server stops: a stream still catching up closes when it subscribes."""

    def feed(self, run_id: str, *, poll_seconds: float, queue_limit: int) -> RunFeed:
        feed = self.feeds.get(run_id)
        if feed is None or feed.is_done:
            feed = RunFeed(run_id, poll_seconds=poll_seconds, queue_limit=queue_limit)
            self.feeds[run_id] = feed
            feed.task = asyncio.create_task(self._run(feed))
        return feed

    def close_streams(self) -> None:
        """Close every open stream of this process, as the server stops: a graceful stop
        waits for open responses, and a live stream never ends by itself. Each client
        resumes with Last-Event-ID from whichever process answers next."""
        self.is_closing = True
        for feed in self.feeds.values():
            for subscriber in feed.subscribers:
                subscriber.drop()
            feed.subscribers.clear()

    async def _run(self, feed: RunFeed) -> None:
        try:
            await feed.run()
        finally:
            if self.feeds.get(feed.run_id) is feed:
                del self.feeds[feed.run_id]


hub = FeedHub()
