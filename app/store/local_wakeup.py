"""Wake-ups between processes of one machine with no service: a datagram socket per listener.

The embedded default has no Redis, so each API process that streams binds a Unix datagram
socket in `<data_dir>/wakeup/`, and every process that commits events (the worker, the API
itself) sends the run ids to each socket there. A socket left by a dead process refuses
the datagram and is removed. A lost datagram costs one poll interval: the database stays
the log, this only says "read it now".

A socket's path holds at most ~100 bytes. A data directory too deep for that (a test's
temporary folder under pytest-xdist was one: its streams silently fell back to an hour's
poll) gets its sockets in a folder of this user's own in the temporary directory instead,
named by a hash of the data directory, so every process of one service finds the same one.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import logging
import os
import socket
import stat
import tempfile
import uuid
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from app.settings import get_settings

log = logging.getLogger(__name__)
MAX_SOCKET_PATH = 100
"""Bytes of a socket path we bind; the kernel's sun_path holds 108 with its NUL."""


SOCKET_NAME_BYTES = len("/api-4194304-0123abcd.sock")
"""The longest name a listener gives its socket (the largest pid Linux hands out)."""


def wakeup_dir() -> Path:
    """`<data_dir>/wakeup`, or where that is too deep for a socket's path, this user's
    `<tmp>/grpo-wakeup-<uid>-<hash of the data directory>`."""
    data_dir = get_settings().data_dir.resolve()
    directory = data_dir / "wakeup"
    if len(os.fsencode(directory)) + SOCKET_NAME_BYTES <= MAX_SOCKET_PATH:
        return directory
    digest = hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"grpo-wakeup-{os.getuid()}-{digest}"


def _is_private(directory: Path) -> bool:
    """The data directory's own folder, or a real folder owned by this user that no one
    else may write to (a shared temporary directory's folder could be another user's)."""
    if directory.name == "wakeup":
        return directory.is_dir()
    try:
        info = directory.lstat()
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


@lru_cache
def _sender() -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setblocking(False)
    return sock


def publish_local(run_ids: Iterable[str]) -> None:
    """Send the run ids to every listening process; never blocks, never raises."""
    message = "\n".join(run_ids).encode()
    directory = wakeup_dir()
    if not _is_private(directory):
        return  # no process listens yet (or the folder is not ours to trust)
    try:
        paths = [entry.path for entry in os.scandir(directory) if entry.name.endswith(".sock")]
    except OSError:
        return
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
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _is_private(directory):
                raise OSError(f"{directory} is not a folder of this user's own")
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
