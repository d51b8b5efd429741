"""Worker rows: each worker reports itself while alive; stale rows mean a lost worker."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from app.store.db import session_scope
from app.store.models import WorkerState, utcnow


def report_worker(
    name: str,
    *,
    queues: str,
    device: str,
    device_kind: str,
    devices: list[str],
    free_memory_mb: int | None,
    run_id: str | None,
) -> None:
    with session_scope() as session:
        row = session.get(WorkerState, name)
        if row is None:
            row = WorkerState(name=name, started_at=utcnow())
            session.add(row)
        row.queues, row.device, row.free_memory_mb = queues, device, free_memory_mb
        row.device_kind, row.devices = device_kind, devices
        row.run_id, row.last_seen_at = run_id, utcnow()


def forget_worker(name: str) -> None:
    with session_scope() as session:
        session.execute(delete(WorkerState).where(WorkerState.name == name))


def list_workers(*, seen_after: datetime) -> list[WorkerState]:
    stmt = (
        select(WorkerState).where(WorkerState.last_seen_at >= seen_after).order_by(WorkerState.name)
    )
    with session_scope() as session:
        return list(session.scalars(stmt))
