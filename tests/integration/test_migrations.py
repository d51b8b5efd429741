"""Migrations build exactly the models' schema, and unbuild it, on both databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.store.db import make_engine
from app.store.models import Base
from tests.stack import ROOT, create_pg_database, drop_pg_database


@pytest.fixture(params=["postgres", "sqlite"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'm.db'}"
        return
    url = create_pg_database()
    try:
        yield url
    finally:
        drop_pg_database(url)


def alembic_config(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes.update(database_url=url, configure_logger=False)
    return config


def test_upgrade_matches_the_models_and_downgrade_removes_everything(database_url: str) -> None:
    command.upgrade(alembic_config(database_url), "head")
    engine = make_engine(database_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree: {diff}"

    command.downgrade(alembic_config(database_url), "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()
