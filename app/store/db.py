"""Engine and sessions: the one place that knows how to reach the database.

SQLite (the embedded default) runs in WAL mode with a busy timeout so the API and the
worker can write concurrently; PostgreSQL needs nothing special.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

from app.settings import get_settings
from app.store import wakeup  # noqa: F401 - registers the after-commit wake-up hooks


def make_engine(url: str, *, idle_in_transaction_seconds: float | None = None) -> Engine:
    """Create an engine; for SQLite, make the file's folder and switch on WAL.

    On PostgreSQL, `idle_in_transaction_seconds` ends the session of a process that stalls
    inside a transaction (SIGSTOP, a long GC, a partition), so the run row it locked does
    not block the API and the stale sweep until it wakes.
    """
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    options = {}
    if idle_in_transaction_seconds:
        timeout_ms = int(idle_in_transaction_seconds * 1000)
        options["options"] = f"-c idle_in_transaction_session_timeout={timeout_ms}"
    return create_engine(
        url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args=options
    )


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


@lru_cache
def get_engine() -> Engine:
    settings = get_settings()
    # no transaction of ours idles for seconds; one that does belongs to a stalled process
    idle = max(5.0, settings.stale_after_seconds)
    return make_engine(settings.resolved_database_url, idle_in_transaction_seconds=idle)


@lru_cache
def _session_factory() -> sessionmaker[Session]:
    return sessionmaker(get_engine(), expire_on_commit=False)


@contextmanager
def read_scope() -> Iterator[Connection]:
    """A plain connection for small hot reads (what every stream and reload asks): a quarter
    of a session's cost, which goes to the ORM's bookkeeping and to the commit."""
    with get_engine().connect() as conn:
        yield conn


@contextmanager
def session_scope() -> Iterator[Session]:
    """One transaction: commit on success, roll back on error."""
    session = _session_factory()()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def is_database_reachable() -> bool:
    """One `SELECT 1`: what the health check asks of the database."""
    try:
        with get_engine().connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:  # noqa: BLE001 - any failure means "not reachable" to a health check
        return False
