"""The real store in this test process, on a fresh PostgreSQL database or SQLite file.

The settings, engine and session factory are process-wide caches; the fixture points them
at a freshly migrated database and clears them again afterwards. `session` is a session
on it, opened as the worker opens one: each store function handed it commits its own
transaction (app/store/db.py).

Each test's database is a copy of one migrated once per session (PostgreSQL's CREATE
DATABASE ... TEMPLATE, a copy of the SQLite file): `alembic upgrade head` in a process of
its own took ~3 s a test, 600 s of the suite; the migrations themselves are
tests/store/test_migrations.py's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from app.settings import get_settings
from app.store import db
from tests.stack import create_pg_database, drop_pg_database


def _clear_caches() -> None:
    if db._session_factory.cache_info().currsize:
        db.get_engine().dispose()
    for cached in (get_settings, db.get_engine, db._session_factory):
        cached.cache_clear()


@pytest.fixture(params=["postgres", "sqlite"])
def store(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    migrated_stores: dict[str, str],
) -> Iterator[str]:
    """Which store the test runs on; app.store talks to it for the test's duration.
    `migrated_stores`: tests/fixtures/service.py's."""
    is_pg = request.param == "postgres"
    url = create_pg_database(template=migrated_stores["postgres"]) if is_pg else None
    for key in [k for k in os.environ if k.startswith("GRPO_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GRPO_DATA_DIR", str(tmp_path))
    if url:
        monkeypatch.setenv("GRPO_DATABASE_URL", url)
    else:
        for migrated in Path(migrated_stores["sqlite"]).glob("grpo.db*"):
            shutil.copy(migrated, tmp_path / migrated.name)
    try:
        _clear_caches()
        yield request.param
    finally:
        _clear_caches()
        if url:
            drop_pg_database(url)


@pytest.fixture
def session(store: str) -> Iterator[Session]:
    with db.session() as opened:
        yield opened
