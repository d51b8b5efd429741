"""Tokens: when configured, writes need a bearer token (401 without, 403 wrong, 2xx right);
roles: a member acts on its own runs, an admin on all, a viewer only reads."""

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


ROLES = {
    "GRPO_API_TOKENS": "ann:admin:ann-token,mia:member:mia-token,max:member:max-token,"
    "vic:viewer:vic-token"
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def roles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("roles"), extra_env=ROLES, with_worker=False) as s:
        yield s


def test_a_member_acts_on_its_own_runs_an_admin_on_all_a_viewer_reads(roles: Stack) -> None:
    url = f"{roles.url}/api/runs"
    mine = httpx.post(url, json=SPEC, headers=bearer("mia-token"))
    assert mine.status_code == 201 and mine.json()["submitted_by"] == "mia"
    run_id = mine.json()["id"]
    assert httpx.get(f"{url}/{run_id}").json()["submitted_by"] == "mia"

    other = httpx.post(f"{url}/{run_id}/cancel", headers=bearer("max-token"))
    assert other.status_code == 403 and other.json()["error"]["code"] == "forbidden"
    assert "mia's" in other.json()["error"]["message"]
    assert httpx.get(f"{url}/{run_id}").json()["is_cancel_requested"] is False
    for path in ("resume", "clone"):  # resume is the owner's; a clone is the cloner's own run
        answer = httpx.post(f"{url}/{run_id}/{path}", headers=bearer("vic-token"))
        assert answer.status_code == 403 and "viewer" in answer.json()["error"]["message"]
    download = f"{url}/{run_id}/checkpoints/latest/download"
    assert httpx.get(download, headers=bearer("max-token")).status_code == 403
    assert httpx.get(download, headers=bearer("vic-token")).status_code == 403
    assert httpx.get(download, headers=bearer("mia-token")).status_code == 404  # none yet

    clone = httpx.post(f"{url}/{run_id}/clone", headers=bearer("max-token"))
    assert clone.status_code == 201 and clone.json()["submitted_by"] == "max"
    assert httpx.post(f"{url}/{run_id}/cancel", headers=bearer("mia-token")).status_code == 200
    admin = httpx.post(f"{url}/{clone.json()['id']}/cancel", headers=bearer("ann-token"))
    assert admin.status_code == 200 and admin.json()["is_cancel_requested"] is True
    assert httpx.delete(f"{url}/{run_id}", headers=bearer("max-token")).status_code == 403


def test_a_viewer_cannot_write_anything(roles: Stack) -> None:
    url = f"{roles.url}/api/runs"
    submit = httpx.post(url, json=SPEC, headers=bearer("vic-token"))
    assert submit.status_code == 403 and submit.json()["error"]["code"] == "forbidden"
    upload = httpx.post(
        f"{roles.url}/api/datasets?name=x",
        content=b'{"prompt":"a","answer":"b"}',
        headers={"content-type": "application/x-ndjson", **bearer("vic-token")},
    )
    assert upload.status_code == 403
    assert httpx.get(url, headers=bearer("vic-token")).status_code == 200
    run_id = httpx.post(url, json=SPEC, headers=bearer("ann-token")).json()["id"]
    for method, path in (("POST", "cancel"), ("POST", "resume"), ("DELETE", "")):
        target = f"{url}/{run_id}/{path}".rstrip("/")
        answer = httpx.request(method, target, headers=bearer("vic-token"))
        assert answer.status_code == 403, (method, path)
