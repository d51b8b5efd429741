"""Wake-ups between processes of one machine with no service: a datagram socket per listener.

The embedded default has no Redis, so each API process that streams binds a Unix datagram
socket in `<data_dir>/wakeup/`, and every process that commits events (the worker, the API
itself) sends the run ids to each socket there. A socket left by a dead process refuses
the datagram and is removed. A lost datagram costs one poll interval: the database stays
the log, this only says "read it now".
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from app.settings import get_settings

log = logging.getLogger(__name__)
MAX_SOCKET_PATH = 100
"""Bytes of a socket path we bind; the kernel's sun_path holds 108 with its NUL."""


def wakeup_dir() -> Path:
    return get_settings().data_dir.resolve() / "wakeup"


@lru_cache
def _sender() -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setblocking(False)
    return sock


def publish_local(run_ids: Iterable[str]) -> None:
    """Send the run ids to every listening process; never blocks, never raises."""
    message = "\n".join(run_ids).encode()
    try:
        paths = [entry.path for entry in os.scandir(wakeup_dir()) if entry.name.endswith(".sock")]
    except OSError:
        return  # no process listens yet
    for path in paths:
        try:
            _sender().sendto(message, path)
        except ConnectionRefusedError:
            with contextlib.suppress(OSError):
                os.unlink(path)  # its process is gone
        except OSError:
            pass  # full buffer or just removed: the listener polls anyway


class LocalListener:
    """This process's socket: calls on_wake(run_id) in the event loop for each run id heard."""

    def __init__(self, on_wake: Callable[[str], None]) -> None:
        self._on_wake = on_wake
        self._sock: socket.socket | None = None
        self._path: Path | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Bind and listen; False (and streams poll) when the socket cannot be made."""
        directory = wakeup_dir()
        path = directory / f"api-{os.getpid()}-{uuid.uuid4().hex[:8]}.sock"
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            log.warning("data directory path too long for a wake-up socket; streams poll")
            return False
        try:
            directory.mkdir(parents=True, exist_ok=True)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            sock.bind(str(path))
        except OSError as exc:
            log.warning("no wake-up socket (%s); streams poll", exc)
            return False
        self._sock, self._path, self._loop = sock, path, loop
        loop.add_reader(sock.fileno(), self._read)
        atexit.register(self.close)
        return True

    def _read(self) -> None:
        assert self._sock is not None
        heard: set[str] = set()
        while True:
            try:
                heard.update(self._sock.recv(65536).decode().split("\n"))
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
        for run_id in heard:
            if run_id:
                self._on_wake(run_id)

    def close(self) -> None:
        if self._sock is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        if self._path is not None:
            with contextlib.suppress(OSError):
                self._path.unlink()
            self._path = None
