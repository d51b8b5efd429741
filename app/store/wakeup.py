"""Wake live streams early: after a commit that added events, publish the run id on Redis.

The database stays the log; this only shortens the wait of a stream that would otherwise
poll. With the embedded default (no Redis) streams simply poll.
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
from app.store.models import Event

log = logging.getLogger(__name__)
CHANNEL_PREFIX = "grpo:run:"


def redis_url() -> str | None:
    url = get_settings().resolved_broker_url
    return url if url.startswith(("redis://", "rediss://")) else None


@lru_cache
def _publisher(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


@event.listens_for(Session, "after_flush")
def _remember_runs(session: Session, _context: Any) -> None:
    runs = {obj.run_id for obj in session.new if isinstance(obj, Event)}
    if runs:
        session.info.setdefault("woken_runs", set()).update(runs)


@event.listens_for(Session, "after_commit")
def _publish(session: Session) -> None:
    runs = session.info.pop("woken_runs", None)
    url = redis_url()
    if not runs or not url:
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
    """One Redis subscription per server process, fanned out to waiting streams."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, run_id: str, timeout: float) -> None:
        """Return when the run has news or after timeout, whichever is first."""
        url = redis_url()
        if url is None:
            await asyncio.sleep(timeout)
            return
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._listen(url))
        woken = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(woken)
        try:
            await asyncio.wait_for(woken.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters.get(run_id, set()).discard(woken)

    async def _listen(self, url: str) -> None:
        try:
            client = aioredis.Redis.from_url(url)
            async with client.pubsub() as pubsub:
                await pubsub.psubscribe(CHANNEL_PREFIX + "*")
                async for message in pubsub.listen():
                    if message.get("type") != "pmessage":
                        continue
                    run_id = message["channel"].decode().removeprefix(CHANNEL_PREFIX)
                    for woken in self._waiters.get(run_id, set()):
                        woken.set()
        except (redis.RedisError, OSError):
            log.warning("wake-up subscription lost; streams poll until it is back")


waker = Waker()
