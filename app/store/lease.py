"""A worker's lease on the run it claimed: every write the owner makes is conditional on it.

`runs.claim_run` bumps `run.lease` (a fencing token that never goes back) and the worker
holds `Lease(run_id, token)`. Its heartbeat, step writes, the check before a checkpoint
rename, the final status and a hand-back to the queue are all
`UPDATE run ... WHERE id = ? AND lease = ? AND status = 'running'` with the row count
checked, on SQLite and PostgreSQL alike. A worker that stalled past the stale limit (its
run requeued and claimed by another) gets `LeaseLost` at its next write, before it has
written anything, and stops. Knows nothing of Celery or HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.events import insert_log
from app.store.models import FINAL_STATUSES, LogLine, Run, RunStatus, utcnow
from app.store.runs import add_status_event, resume_point


@dataclass(frozen=True)
class Lease:
    run_id: str
    token: int

    @classmethod
    def of(cls, run: Run) -> Lease:
        """The lease a fresh claim (runs.claim_run) returned."""
        return cls(run.id, run.lease)


class LeaseLost(RuntimeError):
    """This worker no longer owns the run: it must stop and write nothing more."""


def hold(session: Session, lease: Lease, **values: Any) -> None:
    """The conditional update every owner write starts with; it also beats the heartbeat and
    locks the run's row, which serialises the run's event writers (as lock_run_events does)."""
    result = session.execute(
        update(Run)
        .where(Run.id == lease.run_id, Run.lease == lease.token, Run.status == RunStatus.RUNNING)
        .values(heartbeat_at=utcnow(), **values)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise LeaseLost(_why_lost(session, lease))


def _why_lost(session: Session, lease: Lease) -> str:
    row = session.execute(
        select(Run.status, Run.lease, Run.worker).where(Run.id == lease.run_id)
    ).one_or_none()
    if row is None:
        return f"run {lease.run_id} no longer exists"
    status, token, worker = row
    if token != lease.token:
        return (
            f"run {lease.run_id} was claimed again by {worker} (lease {token}); this worker "
            f"held lease {lease.token}"
        )
    return f"run {lease.run_id} is {status}, no longer running under lease {lease.token}"


@unit
def beat(session: Session, lease: Lease) -> None:
    """Refresh the heartbeat; LeaseLost when the run is no longer this worker's."""
    hold(session, lease)


@unit
def check(session: Session, lease: Lease) -> bool:
    """Whether a cancel was asked for; LeaseLost when the run is no longer this worker's.

    The trainer calls it between steps and right before renaming a checkpoint into place.
    """
    hold(session, lease)
    return bool(session.scalar(select(Run.is_cancel_requested).where(Run.id == lease.run_id)))


@unit
def add_log(
    session: Session, lease: Lease, level: str, message: str, *, at: datetime | None = None
) -> None:
    """A log line of the owner (the trainer's progress notes), written only while it owns.

    Given its time `at`, the line is written once however often it is sent: a retry after a
    commit whose answer was lost (worker/db_outage.py) finds it there."""
    hold(session, lease)
    if at is not None and _has_log(session, lease.run_id, message, at=at):
        return
    insert_log(session, lease.run_id, level, message, at=at)


def _has_log(session: Session, run_id: str, message: str, *, at: datetime) -> bool:
    stmt = select(LogLine.id).where(
        LogLine.run_id == run_id, LogLine.created_at == at, LogLine.message == message
    )
    return session.scalar(stmt.limit(1)) is not None


@unit
def finish(
    session: Session,
    lease: Lease,
    *,
    status: RunStatus,
    error: str | None = None,
    cause: dict[str, Any] | None = None,
    trace: str | None = None,
) -> None:
    """The final status (with the error as a log line first, when there is one). A failure's
    `cause` (grpo/cause.py, as a dict) is kept on the run, and `trace`, the cause as a
    traceback, is the log line after the error."""
    assert status in FINAL_STATUSES
    hold(session, lease, status=status, error=error, cause=cause, finished_at=utcnow())
    if error:
        insert_log(session, lease.run_id, "error", error)
    if trace:
        insert_log(session, lease.run_id, "error", trace)
    _add_status_event(session, lease.run_id)


@unit
def hand_back(session: Session, lease: Lease, *, reason: str, say_where: bool = False) -> None:
    """Back to `queued` for the next worker, which resumes from the last checkpoint (or
    starts again from step 0 without one); `say_where`: the log line ends with which."""
    hold(session, lease, status=RunStatus.QUEUED, dispatched_at=utcnow())
    if say_where:
        reason = f"{reason}; it {resume_point(session, lease.run_id)}"
    insert_log(session, lease.run_id, "warning", reason)
    _add_status_event(session, lease.run_id)


@unit
def is_left_as(session: Session, lease: Lease, status: RunStatus) -> bool:
    """Whether the run is `status` and was last claimed under `lease`: a final status or a
    hand-back of this owner's whose commit landed though its answer was lost."""
    row = session.execute(select(Run.status, Run.lease).where(Run.id == lease.run_id)).one_or_none()
    return row is not None and tuple(row) == (status, lease.token)


def _add_status_event(session: Session, run_id: str) -> None:
    run = session.get(Run, run_id)
    assert run is not None
    session.refresh(run)
    add_status_event(session, run)
