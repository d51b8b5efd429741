"""Migrations build exactly the models' schema, and unbuild it, on both databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import inspect, select, text

from app.store.db import make_engine
from app.store.models import Base, StepMetric, WorkerState
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


def test_steps_stored_before_the_spread_histogram_read_back_an_empty_one(
    database_url: str,
) -> None:
    command.upgrade(alembic_config(database_url), "0001")
    engine = make_engine(database_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO run (id, name, status, spec, package_version, queue, step,"
                " total_steps, attempts, is_cancel_requested)"
                " VALUES ('old', 'old', 'succeeded', '{}', '0', 'default', 1, 1, 1, false)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO step_metric (run_id, step, metrics, advantage_histogram,"
                " reward_histogram) VALUES ('old', 1, '{\"reward\": 0.5}', '[1]', '[2]')"
            )
        )
    command.upgrade(alembic_config(database_url), "head")
    with engine.connect() as conn:
        row = conn.execute(
            select(StepMetric.reward_histogram, StepMetric.group_reward_std_histogram)
        ).one()
    assert tuple(row) == ([2], [])
    command.downgrade(alembic_config(database_url), "0001")
    assert "group_reward_std_histogram" not in {
        c["name"] for c in inspect(engine).get_columns("step_metric")
    }
    engine.dispose()


def test_workers_reported_before_devices_read_back_as_one_cpu_slot(database_url: str) -> None:
    command.upgrade(alembic_config(database_url), "0005")
    engine = make_engine(database_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO worker (name, queues, device, started_at, last_seen_at)"
                " VALUES ('old', 'default', 'cpu', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
        )
    command.upgrade(alembic_config(database_url), "head")
    with engine.connect() as conn:
        row = conn.execute(select(WorkerState.device_kind, WorkerState.devices)).one()
    assert tuple(row) == ("cpu", ["0"])
    command.downgrade(alembic_config(database_url), "0005")
    assert {"device_kind", "devices"}.isdisjoint(
        c["name"] for c in inspect(engine).get_columns("worker")
    )
    engine.dispose()
