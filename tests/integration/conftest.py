"""Integration fixtures: the real service on PostgreSQL + Redis, and on the embedded default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.stack import REDIS_URL, Stack, create_pg_database, drop_pg_database, running_stack


@pytest.fixture(scope="session")
def pg_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    url = create_pg_database()
    try:
        with running_stack(
            tmp_path_factory.mktemp("pg"), database_url=url, broker_url=REDIS_URL
        ) as stack:
            yield stack
    finally:
        drop_pg_database(url)


@pytest.fixture(scope="session")
def embedded_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("embedded")) as stack:
        yield stack


@pytest.fixture(params=["postgres", "embedded"])
def stack(request: pytest.FixtureRequest) -> Stack:
    name = "pg_stack" if request.param == "postgres" else "embedded_stack"
    return request.getfixturevalue(name)


def tiny_spec(stack: Stack, **overrides: object) -> dict[str, object]:
    """A spec small enough to train in seconds on the random built-in model."""
    spec: dict[str, object] = {
        "name": "tiny",
        "model": "builtin:tiny",
        "max_steps": 3,
        "prompts_per_step": 2,
        "num_generations": 4,
        "max_completion_length": 6,
        "learning_rate": 1e-3,
        "save_steps": 2,
        "resources": {"queue": stack.queue},
    }
    spec.update(overrides)
    return spec
