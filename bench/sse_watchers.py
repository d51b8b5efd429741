"""Many SSE watchers in one asyncio loop, on raw sockets: a load generator cheap enough to
share 2 cores with the service it measures (httpx would cost more than the server).

Each watcher records every event id it receives with its arrival time, reconnects with
Last-Event-ID when the server closes the stream early, and stops at the `end` event.
Loopback only: the bench never points this anywhere else.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

FRAME_ID = re.compile(rb"(?m)^id: (\d+)$")


@dataclass
class Watcher:
    ids: list[int] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    reconnects: int = 0
    errors: list[str] = field(default_factory=list)
    is_ended: bool = False
    opened_at: float | None = None
    """Wall time the first response began: events made before it waited for the watcher."""


async def _read_head(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1])


async def _stream_once(port: int, path: str, watcher: Watcher) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    last = f"Last-Event-ID: {watcher.ids[-1]}\r\n" if watcher.ids else ""
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
        f"{last}\r\n".encode()
    )
    try:
        status = await _read_head(reader)
        if watcher.opened_at is None:
            watcher.opened_at = time.time()
        if status != 200:
            watcher.errors.append(f"HTTP {status}")
            return
        buffer = b""
        while chunk := await reader.read(1 << 20):
            now = time.time()
            buffer += chunk
            whole, sep, buffer = buffer.rpartition(b"\n\n")
            if not sep:
                continue  # no whole event yet: rpartition left it all in buffer
            for match in FRAME_ID.finditer(whole):
                watcher.ids.append(int(match.group(1)))
                watcher.arrivals.append(now)
            if b"event: end\n" in whole:
                watcher.is_ended = True
                return
    finally:
        writer.close()


async def watch(port: int, path: str, watcher: Watcher, *, deadline: float) -> None:
    """Follow one stream until `end` (reconnecting as a browser would) or the deadline."""
    while not watcher.is_ended and time.monotonic() < deadline:
        try:
            async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                await _stream_once(port, path, watcher)
        except (OSError, asyncio.IncompleteReadError) as exc:
            watcher.errors.append(repr(exc))
            await asyncio.sleep(0.5)
        except TimeoutError:
            watcher.errors.append("deadline")
            return
        if not watcher.is_ended:
            watcher.reconnects += 1


async def get_once(port: int, path: str) -> float:
    """One GET on a fresh connection (a page reload); returns seconds to the whole body."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    writer.write(request.encode())
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if int(head.split(b" ", 2)[1]) != 200:
            raise RuntimeError(f"GET {path}: {head[:100]!r}")
        await reader.read()  # Connection: close, so the body ends with the connection
        return time.perf_counter() - start
    finally:
        writer.close()
