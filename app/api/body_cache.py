"""Encoded bodies of a run's per-step resources, kept per run version.

A run's /metrics or /histograms body changes only when the run gets a new event (a step,
a status change, a log line): keyed by the run's newest event id, a body is immutable. So
a room reloading a dashboard pays one database read and one encoding per process, not one
per request; concurrent misses of one key wait for the first instead of each reading.
Bounded by total bytes, least recently used first out.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Hashable

from starlette.concurrency import run_in_threadpool

MAX_BYTES = 64 * 1024 * 1024


class BodyCache:
    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bodies: OrderedDict[Hashable, bytes] = OrderedDict()
        self.size = 0
        self.pending: dict[Hashable, asyncio.Future[bytes]] = {}

    async def get(self, key: Hashable, encode: Callable[[], str]) -> bytes:
        """The body for key, encoded (in a worker thread) only if not already done or doing."""
        body = self.bodies.get(key)
        if body is not None:
            self.bodies.move_to_end(key)
            return body
        task = self.pending.get(key)
        if task is None:
            task = asyncio.ensure_future(self._encode(key, encode))
            self.pending[key] = task
        return await asyncio.shield(task)  # a client that hangs up does not cancel the others

    async def _encode(self, key: Hashable, encode: Callable[[], str]) -> bytes:
        try:
            body = (await run_in_threadpool(encode)).encode()
        finally:
            del self.pending[key]
        self._keep(key, body)
        return body

    def _keep(self, key: Hashable, body: bytes) -> None:
        if len(body) > self.max_bytes // 4:
            return  # one huge run must not flush every other
        self.bodies[key] = body
        self.size += len(body)
        while self.size > self.max_bytes:
            _, evicted = self.bodies.popitem(last=False)
            self.size -= len(evicted)


bodies = BodyCache()
