"""What the run writes from rank 0's process (steps, log lines, lease checks, checkpoint
rows, evaluations), each under the worker's lease and through a database outage.

A write that finds the database unreachable waits for it, up to GRPO_DB_OUTAGE_WAIT_SECONDS
(worker/db_outage.py), and the run goes on: no retry of the run is spent, no step is lost,
and the first write after the outage says in the run's log how long it waited. Past the
limit the run gives up on the database (GaveUp): its ranks stop where they are, with no
checkpoint (one needs the lease check before its rename), and the worker hands the run back
to the queue once the database answers, as a stopping worker does past its grace; the next
attempt resumes from the last checkpoint (step 0 without one) and trains the steps after it
again (their rows are replaced, never duplicated).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from app.settings import get_settings
from app.store import db, lease
from app.store.lease import Lease
from app.store.models import utcnow
from worker.db_outage import DatabaseUnreachable, OutageWait, take_outage

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger(__name__)


class GaveUp(Exception):  # noqa: N818 - a decision, not an error
    """The run gave up on the database (now or before): it writes nothing more and stops."""


class RunWrites:
    """The store calls of rank 0 for the run it trains under `held`."""

    def __init__(self, held: Lease) -> None:
        self.held = held
        self.waits = OutageWait(get_settings().db_outage_wait_seconds)
        self.gave_up: str | None = None
        """Why the run stopped writing: the database did not answer in time."""

    def call(
        self, fn: Callable[Concatenate[db.Session, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """The store call, waiting out an outage; GaveUp past the limit, and ever after."""
        return self._through(lambda: self.waits.call(fn, *args, **kwargs))

    def read(
        self, fn: Callable[Concatenate[db.Connection, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        return self._through(lambda: self.waits.read(fn, *args, **kwargs))

    def _through(self, attempt: Callable[[], R]) -> R:
        if self.gave_up is not None:
            raise GaveUp(self.gave_up)
        try:
            result = attempt()
        except DatabaseUnreachable as exc:
            self.gave_up = str(exc)
            log.warning("run %s: gave up on the database: %s", self.held.run_id, exc)
            raise GaveUp(self.gave_up) from exc
        waited = take_outage()
        if waited is not None:
            self.add_log("warning", f"database unreachable for {waited:.1f} s; waited and went on")
        return result

    def add_log(self, level: str, message: str) -> None:
        """A log line of the run (its time makes a retried write idempotent)."""
        self.call(lease.add_log, self.held, level, message, at=utcnow())

    def check(self) -> bool:
        """The lease check: True when a cancel was asked for; LeaseLost when the run is no
        longer this worker's (between steps, and right before a checkpoint's rename)."""
        return self.call(lease.check, self.held)
