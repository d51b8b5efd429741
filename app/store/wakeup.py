"""Wake live streams early: after a commit that added events, tell every API process.

The database stays the log; a wake-up only says "read it now" to a stream that would
otherwise poll. With a Redis broker, the run id is published on Redis; on the embedded
default, it is sent to each API process's Unix datagram socket (local_wakeup.py), so no
extra service is needed. Polling remains the fallback when neither is live.
"""

from __future__ import annotations

import asyncio
import logging
from functools import lru_cache
from typing import Any

import redis
import redis.asyncio as aioredis
from sqlalchemy import event
from sqlalchemy.orm import Session

from app.settings import get_settings
from app.store.local_wakeup import LocalListener, publish_local
from app.store.models import Event

log = logging.getLogger(__name__)
CHANNEL_PREFIX = "grpo:run:"
SUBSCRIBE_WAIT_SECONDS = 2.0


def redis_url() -> str | None:
    url = get_settings().resolved_broker_url
    return url if url.startswith(("redis://", "rediss://")) else None


@lru_cache
def _publisher(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def mark_woken(session: Session, run_id: str) -> None:
    """Wake the run's streams after this session commits (for events inserted with Core)."""
    session.info.setdefault("woken_runs", set()).add(run_id)


@event.listens_for(Session, "after_flush")
def _remember_runs(session: Session, _context: Any) -> None:
    for obj in session.new:
        if isinstance(obj, Event):
            mark_woken(session, obj.run_id)


@event.listens_for(Session, "after_commit")
def _publish(session: Session) -> None:
    runs = session.info.pop("woken_runs", None)
    if not runs:
        return
    url = redis_url()
    if url is None:
        publish_local(runs)
        return
    try:
        for run_id in runs:
            _publisher(url).publish(CHANNEL_PREFIX + run_id, "1")
    except redis.RedisError:
        log.warning("could not publish a wake-up; streams fall back to polling")


@event.listens_for(Session, "after_rollback")
def _forget(session: Session) -> None:
    session.info.pop("woken_runs", None)


class Waker:
    """This process's one wake-up listener (a Redis subscription or a local socket), fanned
    out to one asyncio.Event per watched run."""

    def __init__(self) -> None:
        self._listeners: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None
        self._local: LocalListener | None = None
        self._has_local_failed = False
        self._subscribed = asyncio.Event()

    @property
    def is_live(self) -> bool:
        """Whether wake-ups arrive now (else readers must poll at the short interval)."""
        if self._local is not None:
            return True
        return self._task is not None and not self._task.done() and self._subscribed.is_set()

    async def start(self) -> None:
        """Listen, if not already; returns once wake-ups can arrive (or it gave up waiting)."""
        self.ensure_listening()
        if self._task is not None and not self._subscribed.is_set():
            try:
                async with asyncio.timeout(SUBSCRIBE_WAIT_SECONDS):
                    await self._subscribed.wait()
            except TimeoutError:
                pass

    def ensure_listening(self) -> None:
        """(Re)start listening without waiting; a no-op while the listener is alive."""
        url = redis_url()
        if url is None:
            if self._local is None and not self._has_local_failed:
                local = LocalListener(self._wake)
                if local.start(asyncio.get_running_loop()):
                    self._local = local
                else:
                    self._has_local_failed = True
            return
        if self._task is None or self._task.done():
            self._subscribed = asyncio.Event()
            self._task = asyncio.create_task(self._listen(url))

    def subscribe(self, run_id: str) -> asyncio.Event:
        """An event set whenever the run has news; the caller clears it before reading."""
        woken = asyncio.Event()
        self._listeners.setdefault(run_id, set()).add(woken)
        return woken

    def unsubscribe(self, run_id: str, woken: asyncio.Event) -> None:
        listeners = self._listeners.get(run_id)
        if listeners is not None:
            listeners.discard(woken)
            if not listeners:
                del self._listeners[run_id]

    def _wake(self, run_id: str) -> None:
        for woken in self._listeners.get(run_id, ()):
            woken.set()

    async def _listen(self, url: str) -> None:
        try:
            client = aioredis.Redis.from_url(url)
            async with client.pubsub() as pubsub:
                await pubsub.psubscribe(CHANNEL_PREFIX + "*")
                async for message in pubsub.listen():
                    if message.get("type") == "psubscribe":  # Redis confirmed: none missed
                        self._subscribed.set()
                    elif message.get("type") == "pmessage":
                        self._wake(message["channel"].decode().removeprefix(CHANNEL_PREFIX))
        except (redis.RedisError, OSError):
            log.warning("wake-up subscription lost; streams poll until it is back")
        finally:
            # A reader that missed a wake-up while the subscription was down reads now.
            for run_id in list(self._listeners):
                self._wake(run_id)


waker = Waker()
