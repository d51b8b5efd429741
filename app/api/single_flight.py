"""One builder per cached file at a time: across the API's threads (a lock per path) and
its processes (an `flock` on `<file>.lock` beside it). Whoever waited finds the file built
and serves it, so every client of one archive reads the same bytes; a bounded pool caps
how many merges run at once. Knows nothing of HTTP or torch.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MAX_PARALLEL_MERGES = 2
"""Merge subprocesses (each loads a full model) one API process runs at once."""
merge_slots = threading.BoundedSemaphore(MAX_PARALLEL_MERGES)

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def lock_path(target: Path) -> Path:
    return target.with_name(f"{target.name}.lock")


@contextmanager
def single_flight(target: Path) -> Iterator[None]:
    """Hold the right to build `target` (check again inside: another may have built it)."""
    with _locks_guard:
        lock = _locks.setdefault(target, threading.Lock())
    with lock:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path(target), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
