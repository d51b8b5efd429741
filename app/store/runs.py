"""Run rows: create, read, list, and every status transition (each one also an event).

With lease.py (the owner's conditional writes), the only code that moves a run's status;
every transition is a conditional UPDATE whose row count decides who won. Knows nothing
of HTTP or Celery.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.models import (
    FINAL_STATUSES,
    Checkpoint,
    Diagnosis,
    Event,
    Finding,
    LogLine,
    Rescore,
    RescoreGroup,
    Run,
    RunNode,
    RunStatus,
    Sample,
    StepGroup,
    StepMetric,
    utcnow,
)
from app.store.wakeup import mark_woken
from grpo.spec import JobSpec
from grpo.spec.vllm import ADDRESS_FIELDS, needs_generation_worker


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def run_summary(run: Run) -> dict[str, Any]:
    """The run as every client sees it (API body, status events)."""
    return {
        "id": run.id,
        "name": run.name,
        "status": run.status,
        "spec": run.spec,
        "package_version": run.package_version,
        "submitted_by": run.submitted_by,
        "step": run.step,
        "total_steps": run.total_steps,
        "last_metrics": run.last_metrics,
        "error": run.error,
        "cause": run.cause,
        "worker": run.worker,
        "device": run.device,
        "attempts": run.attempts,
        "is_cancel_requested": run.is_cancel_requested,
        "waiting_for": run.waiting_for if run.status == RunStatus.QUEUED else None,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "heartbeat_at": _iso(run.heartbeat_at),
    }


def add_status_event(session: Session, run: Run) -> None:
    session.flush()
    session.add(Event(run_id=run.id, kind="status", payload=run_summary(run)))


def stored_spec(spec: JobSpec) -> dict[str, Any]:
    """The spec as a run keeps it: every field set, except a server address the submitter
    did not give (a run placed on a generation worker), so that a copy of it (the new-run
    page's "edit as new", `grpo runs get`'s spec resubmitted) is placed the same way rather
    than pointed at TRL's default 0.0.0.0:8000."""
    unset = ADDRESS_FIELDS if needs_generation_worker(spec) else frozenset()
    return spec.model_dump(mode="json", exclude=set(unset))


def create_run(
    session: Session,
    spec: JobSpec,
    *,
    package_version: str,
    idempotency_key: str | None = None,
    submitted_by: str | None = None,
) -> tuple[Run, bool]:
    """Insert a queued run; with an idempotency key already used, return that run instead.

    Returns (run, is_new). Called outside any transaction: a lost race on the key rolls
    back the insert's own.
    """
    if idempotency_key:
        existing = find_by_idempotency_key(session, idempotency_key)
        if existing:
            return existing, False
    run = Run(
        id=uuid.uuid4().hex[:16],
        name=spec.display_name,
        status=RunStatus.QUEUED,
        spec=stored_spec(spec),
        package_version=package_version,
        queue=spec.resources.queue,
        idempotency_key=idempotency_key,
        submitted_by=submitted_by,
        step=0,
        total_steps=spec.max_steps,
        attempts=0,
        lease=0,
        is_cancel_requested=False,
        created_at=utcnow(),
        dispatched_at=utcnow(),  # the send follows the commit; a failed one clears this
        needs_generation=needs_generation_worker(spec),
        generation_worker=None,
        generation_lease=None,
        generation_url=None,
        waiting_for=None,
    )
    try:
        _insert_run(session, run)
    except IntegrityError:
        # Two retries raced on one key: the other insert won; return its run.
        existing = find_by_idempotency_key(session, idempotency_key or "")
        if existing is None:
            raise
        return existing, False
    return run, True


@unit
def _insert_run(session: Session, run: Run) -> None:
    # Core inserts: the submit path is hot, and the unit of work adds nothing here.
    values = {c.key: getattr(run, c.key) for c in Run.__table__.columns}
    session.execute(insert(Run), [values])
    session.execute(
        insert(Event), [{"run_id": run.id, "kind": "status", "payload": run_summary(run)}]
    )
    mark_woken(session, run.id)


@unit
def find_by_idempotency_key(session: Session, key: str) -> Run | None:
    return session.scalar(select(Run).where(Run.idempotency_key == key))


@unit
def get_run(session: Session, run_id: str) -> Run | None:
    return session.get(Run, run_id)


@unit
def get_status(session: Session, run_id: str) -> str | None:
    """The run's status alone (None when there is no such run): what an idle stream polls."""
    return session.scalar(select(Run.status).where(Run.id == run_id))


@unit
def list_runs(
    session: Session,
    *,
    status: str | None = None,
    query: str | None = None,
    limit: int = 50,
    cursor: tuple[datetime, str] | None = None,
) -> list[Run]:
    """Newest first; `cursor` is the (created_at, id) of the last run of the previous page."""
    stmt = select(Run).order_by(Run.created_at.desc(), Run.id.desc()).limit(limit)
    if status:
        stmt = stmt.where(Run.status == status)
    if query:
        # % and _ in a search are the characters themselves, not LIKE wildcards
        literal = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        stmt = stmt.where(Run.name.ilike(f"%{literal}%", escape="\\"))
    if cursor:
        created_at, run_id = cursor
        stmt = stmt.where(
            or_(Run.created_at < created_at, (Run.created_at == created_at) & (Run.id < run_id))
        )
    return list(session.scalars(stmt))


def _changed(session: Session, result: Any, run_id: str) -> Run | None:
    """After a conditional status update: the run with its status event, or None when the
    condition did not hold (another caller won, or the run was not in that state)."""
    if result.rowcount != 1:
        return None
    run = session.get(Run, run_id)
    assert run is not None
    session.refresh(run)
    add_status_event(session, run)
    return run


@unit
def claim_run(session: Session, run_id: str, *, worker: str, device: str) -> Run | None:
    """Move a queued run to running for this worker; None when it is not queued (idempotent).

    The claim takes the next lease token: `lease.Lease.of(run)` is what the worker holds.
    """
    now = utcnow()
    result = session.execute(
        update(Run)
        .where(Run.id == run_id, Run.status == RunStatus.QUEUED, Run.is_cancel_requested.is_(False))
        .values(
            status=RunStatus.RUNNING,
            worker=worker,
            device=device,
            started_at=now,
            heartbeat_at=now,
            attempts=Run.attempts + 1,
            lease=Run.lease + 1,
            error=None,
            cause=None,
            waiting_for=None,
        )
    )
    return _changed(session, result, run_id)


@unit
def finish_run(
    session: Session, run_id: str, *, status: RunStatus, error: str | None = None
) -> Run | None:
    """Record a final status (succeeded, failed, cancelled) once; later calls change nothing."""
    assert status in FINAL_STATUSES
    run = session.get(Run, run_id, with_for_update=True)
    if run is None or run.status in FINAL_STATUSES:
        return run
    run.status = status
    run.error = error
    run.finished_at = utcnow()
    run.waiting_for = None
    add_status_event(session, run)
    return run


@unit
def request_cancel(session: Session, run_id: str) -> Run | None:
    """Queued runs become cancelled now; running ones stop at the next step boundary."""
    run = session.get(Run, run_id, with_for_update=True)
    if run is None or run.status in FINAL_STATUSES:
        return run
    run.is_cancel_requested = True
    if run.status == RunStatus.QUEUED:
        run.status = RunStatus.CANCELLED
        run.finished_at = utcnow()
        run.waiting_for = None
    add_status_event(session, run)
    return run


def resume_point(session: Session, run_id: str) -> str:
    """Where the run's next attempt starts, from its checkpoint rows (the worker resumes
    from the newest checkpoint on disk): "resumes from step N (its last checkpoint)" or
    "starts again from step 0: it saved no checkpoint"."""
    stmt = select(func.max(Checkpoint.step)).where(Checkpoint.run_id == run_id)
    step = session.scalar(stmt)
    if step is None:
        return "starts again from step 0: it saved no checkpoint"
    return f"resumes from step {step} (its last checkpoint)"


@unit
def requeue_run(session: Session, run_id: str) -> Run | None:
    """A cancelled or failed run goes back to queued; it resumes from its last checkpoint,
    or starts again from step 0 if it saved none (`resume_point`).

    None when the run was not cancelled or failed at that instant: of concurrent resumes,
    exactly one wins (a conditional update; `with_for_update` is a no-op on SQLite).
    """
    result = session.execute(
        update(Run)
        .where(Run.id == run_id, Run.status.in_((RunStatus.CANCELLED, RunStatus.FAILED)))
        .values(
            status=RunStatus.QUEUED,
            error=None,
            cause=None,
            finished_at=None,
            is_cancel_requested=False,
            attempts=0,  # the retry count starts again; the lease token does not
            dispatched_at=utcnow(),
            waiting_for=None,
        )
    )
    return _changed(session, result, run_id)


@unit
def requeue_stale_runs(
    session: Session, *, stale_before: datetime, max_retries: int, worker: str | None = None
) -> tuple[list[Run], list[Run]]:
    """Runs whose worker stopped beating (or, given `worker`, runs of that worker, known to
    be dead): requeue (returned first) or, past the retry limit, fail."""
    requeued, failed = [], []
    lost = Run.worker == worker if worker else Run.heartbeat_at < stale_before
    stale = session.scalars(
        select(Run).where(Run.status == RunStatus.RUNNING, lost).with_for_update(skip_locked=True)
    ).all()
    for run in stale:
        run.cause = None  # the worker's silence has no traceback
        if run.attempts > max_retries:
            run.status, run.finished_at = RunStatus.FAILED, utcnow()
            run.error = (
                f"worker {run.worker} stopped responding {run.attempts} times; "
                f"gave up after {max_retries} retries"
            )
            failed.append(run)
        else:
            run.status, run.dispatched_at = RunStatus.QUEUED, utcnow()
            where = resume_point(session, run.id)
            run.error = f"worker {run.worker} stopped responding; requeued: it {where}"
            requeued.append(run)
        add_status_event(session, run)
    return requeued, failed


@unit
def delete_run(session: Session, run_id: str) -> bool:
    """Delete a finished run's rows (cascades to steps, groups, samples, logs, events,
    the doctor's findings, its replays, its nodes' claims)."""
    run = session.get(Run, run_id, with_for_update=True)
    if run is None or run.status not in FINAL_STATUSES:
        return False
    # Explicit deletes: SQLite enforces ON DELETE CASCADE only with foreign_keys=ON.
    replays = select(Rescore.id).where(Rescore.run_id == run_id).scalar_subquery()
    session.execute(delete(RescoreGroup).where(RescoreGroup.rescore_id.in_(replays)))
    session.execute(delete(Rescore).where(Rescore.run_id == run_id))
    tables = (
        Event,
        StepMetric,
        StepGroup,
        Sample,
        LogLine,
        Checkpoint,
        Finding,
        Diagnosis,
        RunNode,
    )
    for table in tables:
        session.execute(delete(table).where(table.run_id == run_id))
    session.delete(run)
    return True
