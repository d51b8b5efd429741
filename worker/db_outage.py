"""The worker waits out a database outage: a store call that cannot reach the database is
tried again until it answers, instead of failing the run.

`OutageWait(limit_s).call(fn, ...)` is `db.call(fn, ...)` that, on a connection error
(refused, lost, the server shutting down: app/store/outage.py `is_unreachable`), tries
again in a fresh session with backoff, until the call goes through or the outage has lasted
`limit_s` (counted from this process's first failed call; None: no limit), and then raises
DatabaseUnreachable. Any other error (an integrity or logic error, LeaseLost) is raised at
once. The run's own writes wait up to GRPO_DB_OUTAGE_WAIT_SECONDS (worker/run_writes.py);
the worker's end-of-run writes wait for as long as it takes (worker/job.py).

Only for idempotent store functions: a commit whose answer was lost may have landed, so the
retry must find its work done or redo it in place. Steps, evaluations and checkpoint rows
replace those of their step, a heartbeat or a lease check changes nothing twice, and a log
line passed its time (`at`) is not written twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Concatenate, ParamSpec, TypeVar

from app.store import db
from app.store.outage import is_unreachable

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger(__name__)
FIRST_RETRY_SECONDS = 0.2
LONGEST_RETRY_SECONDS = 2.0
"""Backoff between tries, doubling from the first: a database that is back is written to
within two seconds."""


class DatabaseUnreachable(RuntimeError):
    """The database did not answer for longer than the wait allowed."""


class _Outage:
    """This process's view of the database: since when its calls find it unreachable (None
    while they reach it), and how long the last outage lasted, until someone takes it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.since: float | None = None
        self.ended: float | None = None

    def failed(self, exc: BaseException) -> float:
        """Seconds since this outage began (0 for its first failed call)."""
        now = time.monotonic()
        with self.lock:
            if self.since is None:
                self.since = now
                log.warning("database unreachable (%s); waiting for it", reason(exc))
            return now - self.since

    def answered(self) -> None:
        with self.lock:
            if self.since is not None:
                self.ended = time.monotonic() - self.since
                self.since = None
                log.warning("database answered again after %.1f s", self.ended)

    def take_ended(self) -> float | None:
        with self.lock:
            ended, self.ended = self.ended, None
            return ended


_outage = _Outage()


class OutageWait:
    """Store calls that wait out a database outage of up to `limit_s` (None: any)."""

    def __init__(self, limit_s: float | None) -> None:
        self.limit_s = limit_s

    def call(
        self, fn: Callable[Concatenate[db.Session, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        return self._wait_out(partial(db.call, fn, *args, **kwargs))

    def read(
        self, fn: Callable[Concatenate[db.Connection, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        return self._wait_out(partial(db.read, fn, *args, **kwargs))

    def _wait_out(self, attempt: Callable[[], R]) -> R:
        delay = FIRST_RETRY_SECONDS
        while True:
            try:
                result = attempt()
            except Exception as exc:
                if not is_unreachable(exc):
                    raise
                waited = _outage.failed(exc)
                if self.limit_s is not None and waited >= self.limit_s:
                    raise DatabaseUnreachable(
                        f"the database did not answer for {waited:.0f} s (GRPO_DB_OUTAGE_WAIT_"
                        f"SECONDS is {self.limit_s:g}): {reason(exc)}"
                    ) from exc
                left = self.limit_s - waited if self.limit_s is not None else delay
                time.sleep(min(delay, left))
                delay = min(2 * delay, LONGEST_RETRY_SECONDS)
                continue
            _outage.answered()
            return result


def note_unreachable(exc: BaseException) -> None:
    """A call of this process's own found the database unreachable (its outage begins)."""
    _outage.failed(exc)


def note_answered() -> None:
    """A call of this process's own went through (an outage, if any, ends)."""
    _outage.answered()


def take_outage() -> float | None:
    """How long this process's last database outage lasted, told once: to the first caller
    after it ended (None when none ended since)."""
    return _outage.take_ended()


def reason(exc: BaseException) -> str:
    """The driver's first line: 'connection refused', 'server closed the connection', ..."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    return lines[0] if lines else type(orig).__name__
