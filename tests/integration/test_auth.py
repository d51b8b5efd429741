"""Tokens: when configured, writes need a bearer token (401 without, 403 wrong, 2xx right)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.stack import Stack, running_stack

TOKENS = {"GRPO_API_TOKENS": "alpha-token,beta-token"}
SPEC = {"model": "builtin:tiny", "max_steps": 1, "resources": {"queue": "parked-no-worker"}}


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("auth"), extra_env=TOKENS, with_worker=False) as s:
        yield s


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {**TOKENS, "GRPO_READ_REQUIRES_TOKEN": "true"}
    with running_stack(
        Path(tmp_path_factory.mktemp("closed")), extra_env=env, with_worker=False
    ) as s:
        yield s


def test_writes_need_a_valid_bearer_token(locked: Stack) -> None:
    url = f"{locked.url}/api/runs"
    missing = httpx.post(url, json=SPEC)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "unauthorized"
    wrong = httpx.post(url, json=SPEC, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "forbidden"
    created = httpx.post(url, json=SPEC, headers={"Authorization": "Bearer beta-token"})
    assert created.status_code == 201
    run_id = created.json()["id"]
    assert httpx.post(f"{url}/{run_id}/cancel").status_code == 401
    assert (
        httpx.post(
            f"{url}/{run_id}/cancel", headers={"Authorization": "Bearer alpha-token"}
        ).status_code
        == 200
    )
    assert (
        httpx.post(
            f"{locked.url}/api/datasets?name=x",
            content=b'{"prompt":"a","answer":"b"}',
            headers={"content-type": "application/x-ndjson"},
        ).status_code
        == 401
    )


def test_reads_are_open_by_default_and_closed_by_setting(locked: Stack, closed: Stack) -> None:
    assert httpx.get(f"{locked.url}/api/runs").status_code == 200
    assert httpx.get(f"{closed.url}/api/runs").status_code == 401
    assert (
        httpx.get(
            f"{closed.url}/api/runs", headers={"Authorization": "Bearer alpha-token"}
        ).status_code
        == 200
    )
    assert httpx.get(f"{closed.url}/api/health").status_code == 200
