"""Worker rows: each worker reports itself while alive; stale rows mean a lost worker."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.models import WorkerState, utcnow


@unit
def report_worker(
    session: Session,
    name: str,
    *,
    queues: str,
    device: str,
    device_kind: str,
    devices: list[str],
    engines: list[str] | None = None,
    free_memory_mb: int | None,
    run_id: str | None,
    threads: int | None = None,
    omp_wait_policy: str | None = None,
    role: str = "training",
    serving: dict[str, str] | None = None,
    address: str | None = None,
) -> None:
    """`role`: `training`, or `generation` with `serving` its server ({run_id, model, url})
    while it runs one; `address`: its GRPO_WORKER_ADDRESS, if set."""
    row = session.get(WorkerState, name)
    if row is None:
        row = WorkerState(name=name, started_at=utcnow())
        session.add(row)
    row.queues, row.device, row.free_memory_mb = queues, device, free_memory_mb
    row.device_kind, row.devices = device_kind, devices
    row.threads, row.omp_wait_policy = threads, omp_wait_policy
    row.engines = engines or ["native"]
    row.run_id, row.last_seen_at = run_id, utcnow()
    row.role, row.serving, row.address = role, serving, address


@unit
def forget_worker(session: Session, name: str) -> None:
    session.execute(delete(WorkerState).where(WorkerState.name == name))


@unit
def list_workers(session: Session, *, seen_after: datetime) -> list[WorkerState]:
    stmt = (
        select(WorkerState).where(WorkerState.last_seen_at >= seen_after).order_by(WorkerState.name)
    )
    return list(session.scalars(stmt))


@dataclass(frozen=True)
class NodeHolders:
    """The registered training workers (`registered`) and how many of them could hold a node
    of a run on several machines (`able`)."""

    registered: int
    able: int


@unit
def node_holders(session: Session, *, queue: str, num_processes: int) -> NodeHolders:
    """Count the training workers registered (a row here: written as a worker starts and at
    every beat, deleted when it stops cleanly; a worker that died keeps its row, as it may
    come back under its name), and those of them that could each hold one node of a run on
    `queue` with `num_processes` ranks a node: listening on the queue, with an address
    (GRPO_WORKER_ADDRESS) and at least `num_processes` devices."""
    rows = session.scalars(select(WorkerState).where(WorkerState.role == "training")).all()
    able = [
        w
        for w in rows
        if w.address and queue in w.queues.split(",") and len(w.devices) >= num_processes
    ]
    return NodeHolders(registered=len(rows), able=len(able))
