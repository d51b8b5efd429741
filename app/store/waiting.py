"""What a queued run waits for (run.waiting_for; `waiting_for` in GET /api/runs): one line,
kept while the run is queued and cleared when it is claimed or ends (app/store/runs.py).

Two writers: the gang of a run on several machines, whose every claim and release of a
node rewrites it from the claims (app/store/nodes.py: "1 of 2 nodes claimed: waiting for 1
more worker holding 1 device"), and a worker that leaves a run queued (worker/job.py: no
GRPO_WORKER_ADDRESS, too few devices, no free generation worker, ...). A worker's reason
does not replace a gang's while a node of it is claimed: the gang's says more. A change is
a status event, so that a page watching the run reads it at once. Knows nothing of HTTP or
Celery.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.events import lock_run_events
from app.store.models import Run, RunNode, RunStatus, utcnow
from app.store.runs import add_status_event


@unit
def set_waiting(session: Session, run_id: str, text: str | None) -> bool:
    """Store `text` as what the queued run waits for (None: nothing), in the caller's
    transaction when it has one; False when the run is not queued or already says it."""
    lock_run_events(session, run_id)
    run = session.get(Run, run_id)
    if run is None or run.status != RunStatus.QUEUED or run.waiting_for == text:
        return False
    run.waiting_for = text
    add_status_event(session, run)
    return True


@unit
def say_waiting(session: Session, run_id: str, reason: str) -> bool:
    """A worker leaves the run queued for `reason`: stored as what it waits for, unless a
    node of its gang is claimed (the gang's wait stands). False when nothing changed."""
    claimed = select(RunNode.id).where(RunNode.run_id == run_id, RunNode.expires_at > utcnow())
    if session.execute(claimed.limit(1)).first() is not None:
        return False
    return set_waiting(session, run_id, reason)
