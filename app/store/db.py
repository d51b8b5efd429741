"""Engine, sessions and units of work: the one place that knows how to reach the database.

Every store function takes what it works in as its first argument; none opens its own.

- `@unit` functions take a `Session`: each is one transaction on the session it is handed,
  as when each opened its own. Handed a session with no transaction open, the function
  begins one and commits it when it returns (rolls it back when it raises), so a lease
  check (lease.hold) stays in the transaction of the writes it guards, a run's row is
  committed before the caller sends it to the queue, and the after-commit wake-ups
  (wakeup.py) fire at that commit. Handed a session already inside a transaction, it joins
  it and the opener commits: that is how a unit calls another, or a test groups several.
  After its commit the unit lets go of what it loaded (objects come back detached, as
  before), so the next unit on the same session reads the database, not a stale copy.
  A request's session only closes at the end (app/api/deps.py), so a store function that
  writes must be a unit (tests/store/test_store_units.py checks).
- Plain reads take a `Connection`: the hot, shared reads of live streams, cached bodies
  and exports (events.read_news, steps.metrics_json, ...). `read(fn, ...)` lends one a
  pooled connection for the call: a quarter of a session's cost (the ORM's bookkeeping
  and the commit), and never a session held across a stream that lasts hours or a body
  that several requests share.

Who opens: a request gets its session from app/api/deps.py (`SessionDep`); the worker, the
CLI and tests open their own with `session()` or `call(fn, ...)`; stream and export
readers borrow a connection per read with `read`. tests/project/test_import_rules.py checks it.

SQLite (the embedded default) runs in WAL mode with a busy timeout so the API and the
worker can write concurrently; PostgreSQL needs nothing special.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache, wraps
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection as Connection  # the type plain reads take
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session as Session  # the type routes and the worker hold
from sqlalchemy.orm import sessionmaker

from app.settings import get_settings
from app.store import wakeup  # noqa: F401 - registers the after-commit wake-up hooks

P = ParamSpec("P")
R = TypeVar("R")


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


def new_session() -> Session:
    """A session bound to the engine; it takes a connection only when first used."""
    return _session_factory()()


@contextmanager
def session() -> Iterator[Session]:
    """A session for a caller outside requests (worker, CLI, tests): commits what is left
    open on success, rolls back on error, closes. Units inside commit their own."""
    opened = new_session()
    try:
        yield opened
        opened.commit()
    except BaseException:
        opened.rollback()
        raise
    finally:
        opened.close()


def call(fn: Callable[Concatenate[Session, P], R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Call one store function in a session of its own: what the worker does for each
    write, from whichever of its threads (a session is not shared between threads)."""
    with session() as opened:
        return fn(opened, *args, **kwargs)


def unit(fn: Callable[Concatenate[Session, P], R]) -> Callable[Concatenate[Session, P], R]:
    """Mark a store function as one transaction on the session it is handed (see above)."""

    @wraps(fn)
    def in_transaction(session: Session, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if session.in_transaction():
            return fn(session, *args, **kwargs)  # part of the caller's transaction
        try:
            with session.begin():
                return fn(session, *args, **kwargs)
        finally:
            session.expunge_all()

    return in_transaction


def read(fn: Callable[Concatenate[Connection, P], R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Call a plain read on a pooled connection lent for the call (see above)."""
    with get_engine().connect() as conn:
        return fn(conn, *args, **kwargs)


def is_database_reachable() -> bool:
    """One `SELECT 1`: what the health check asks of the database."""
    try:
        with get_engine().connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:  # noqa: BLE001 - any failure means "not reachable" to a health check
        return False
