"""The run's event log and log lines: what live streams replay, in id order.

Knows nothing of HTTP: the stream endpoint turns these rows into Server-Sent Events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Integer, Text, bindparam, cast, func, select
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.models import Event, LogLine, Run, utcnow

LOG_LEVELS = ("debug", "info", "warning", "error")


RawEvent = tuple[int, str, str]
"""(id, kind, payload as its stored JSON text): what a stream sends, parsed by nobody."""


def lock_run_events(session: Session, run_id: str) -> None:
    """Serialise a run's event writers, so ids commit in id order and no stream skips one.

    Without it, PostgreSQL could commit event 11 before event 10 of the same run; a stream
    that already sent 11 would never send 10. SQLite serialises writers by itself.
    """
    session.execute(select(Run.id).where(Run.id == run_id).with_for_update())


@unit
def add_log(session: Session, run_id: str, level: str, message: str) -> None:
    """Store a log line and its event in one transaction."""
    lock_run_events(session, run_id)
    insert_log(session, run_id, level, message)


def insert_log(
    session: Session, run_id: str, level: str, message: str, *, at: datetime | None = None
) -> None:
    """A log line and its event (at `at`, default now), in a transaction that already holds
    the run's event lock."""
    level = level.lower() if level.lower() in LOG_LEVELS else "info"
    now = at or utcnow()
    session.add(LogLine(run_id=run_id, level=level, message=message, created_at=now))
    payload = {"level": level, "message": message, "created_at": now.isoformat()}
    session.add(Event(run_id=run_id, kind="log", payload=payload, created_at=now))


def events_after(
    conn: Connection, run_id: str, after_id: int, *, limit: int = 500
) -> list[RawEvent]:
    return _events_after(conn, run_id, after_id, limit)


# Built once: building a statement costs more than running it on these hot paths.
_HEAD = select(
    Run.status,
    select(func.max(Event.id)).where(Event.run_id == bindparam("run_id")).scalar_subquery(),
).where(Run.id == bindparam("run_id"))
_STATUS = select(Run.status).where(Run.id == bindparam("run_id"))
_AFTER = (
    select(Event.id, Event.kind, cast(Event.payload, Text))
    .where(Event.run_id == bindparam("run_id"), Event.id > bindparam("after_id"))
    .order_by(Event.id)
    .limit(bindparam("limit", type_=Integer))
)


def read_head(conn: Connection, run_id: str) -> tuple[str | None, int]:
    """The run's status (None: no such run) and its newest event id (0: none), one query."""
    row = conn.execute(_HEAD, {"run_id": run_id}).first()
    return (row[0], row[1] or 0) if row else (None, 0)


def read_news(
    conn: Connection, run_id: str, after_id: int, *, limit: int = 500
) -> tuple[str | None, list[RawEvent]]:
    """The run's status, then its events after after_id. Read in that order, a final status
    vouches that the events that preceded it are all in the list (unless it is full)."""
    status = conn.scalar(_STATUS, {"run_id": run_id})
    return status, _events_after(conn, run_id, after_id, limit)


def _events_after(conn: Connection, run_id: str, after_id: int, limit: int) -> list[RawEvent]:
    params = {"run_id": run_id, "after_id": after_id, "limit": limit}
    return [(i, k, p) for i, k, p in conn.execute(_AFTER, params).all()]


def list_logs(conn: Connection, run_id: str, *, limit: int = 1000) -> list[dict[str, Any]]:
    stmt = (
        select(LogLine.level, LogLine.message, LogLine.created_at)
        .where(LogLine.run_id == run_id)
        .order_by(LogLine.id)
        .limit(limit)
    )
    rows = conn.execute(stmt).all()
    return [{"level": lv, "message": m, "created_at": c.isoformat()} for lv, m, c in rows]
