"""When a queued run's task was last sent, and which queued runs are due to be sent again.

A send can fail (the broker is down) or be lost (a broker restarted without persistence);
the run row is committed first either way, so the run is never lost, only late: the
housekeeping sweep takes the runs due here and sends them again. Claims are idempotent,
so a run sent twice trains once. Knows nothing of Celery.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.models import Run, RunStatus, utcnow


@unit
def mark_undispatched(session: Session, run_id: str) -> None:
    """The send after the commit failed: the next sweep sends it."""
    session.execute(
        update(Run)
        .where(Run.id == run_id, Run.status == RunStatus.QUEUED)
        .values(dispatched_at=None)
    )


@unit
def take_due(session: Session, *, sent_before: datetime, limit: int = 100) -> list[Run]:
    """Queued runs never sent, or last sent before `sent_before` and still unclaimed; each is
    stamped as sent now, so of several sweeping workers only one sends a given run."""
    now = utcnow()
    due = session.scalars(
        select(Run)
        .where(
            Run.status == RunStatus.QUEUED,
            Run.is_cancel_requested.is_(False),
            or_(Run.dispatched_at.is_(None), Run.dispatched_at < sent_before),
        )
        .order_by(Run.created_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    for run in due:
        run.dispatched_at = now
    return list(due)
