"""The real store in this test process, on a fresh PostgreSQL database or SQLite file.

The settings, engine and session factory are process-wide caches; the fixture points them
at a freshly migrated database and clears them again afterwards. `session` is a session
on it, opened as the worker opens one: each store function handed it commits its own
transaction (app/store/db.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from app.settings import get_settings
from app.store import db
from tests.stack import create_pg_database, drop_pg_database, migrate


def _clear_caches() -> None:
    if db._session_factory.cache_info().currsize:
        db.get_engine().dispose()
    for cached in (get_settings, db.get_engine, db._session_factory):
        cached.cache_clear()


@pytest.fixture(params=["postgres", "sqlite"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Which store the test runs on; app.store talks to it for the test's duration."""
    url = create_pg_database() if request.param == "postgres" else None
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env["GRPO_DATA_DIR"] = str(tmp_path)
    for key in [k for k in os.environ if k.startswith("GRPO_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GRPO_DATA_DIR", str(tmp_path))
    if url:
        env["GRPO_DATABASE_URL"] = url
        monkeypatch.setenv("GRPO_DATABASE_URL", url)
    try:
        migrate(env)
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
