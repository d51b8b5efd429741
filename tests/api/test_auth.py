"""Tokens: when configured, writes need a bearer token (401 without, 403 wrong, 2xx right),
and with GRPO_READ_REQUIRES_TOKEN every read does too, but for an explicit few open routes,
every route of the app enumerated so that none is forgotten; roles: a member acts on its own
runs, an admin on all, a viewer only reads."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.routing import Mount, Route

from app.main import create_app
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


OPEN_READS = {
    "/api/health": "a load balancer's probe",
    "/docs": "an HTML shell; it reads /openapi.json with the token stored in the browser",
    "/redoc": "the same",
    # the dashboard's pages: HTML shells whose every number is a read of the API
    "/": "dashboard",
    "/runs/new": "dashboard",
    "/runs/{run_id}": "dashboard",
    "/runs/{run_id}/steps/{step}": "dashboard",
    "/runs/{run_id}/steps/{step}/groups/{index}": "dashboard",
    "/runs/{run_id}/prompts/{prompt_id:path}": "dashboard",
    "/compare": "dashboard",
}
OPEN_MOUNTS = {"/static": "the dashboard's scripts and styles"}


def served_routes() -> list[tuple[str, str]]:
    """(method, path) of every route of the app, HEAD aside; a mount or a kind of route that
    is not a plain HTTP route must be in OPEN_MOUNTS, so a new one is a decision."""
    served = []
    for route in create_app().routes:
        if isinstance(route, Mount):
            assert route.path in OPEN_MOUNTS, f"{route.path}: is it open? add it to OPEN_MOUNTS"
        elif isinstance(route, Route) and route.methods:
            served += [(method, route.path) for method in sorted(route.methods - {"HEAD"})]
        else:
            raise AssertionError(f"{route!r}: a kind of route this test does not know")
    return served


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)  # every path parameter (run id, step...) as "1"


def test_with_reads_closed_every_read_but_the_open_few_needs_the_token(closed: Stack) -> None:
    reads = [path for method, path in served_routes() if method == "GET"]
    assert {"/api/presets", "/openapi.json", "/api/runs/{run_id}/events"} <= set(reads)
    assert set(OPEN_READS) <= set(reads), "an open route that is gone: drop it from OPEN_READS"
    with httpx.Client(base_url=closed.url, timeout=30) as client:
        answers = {path: client.get(concrete(path)) for path in reads}
        refused = {p for p, a in answers.items() if a.status_code == 401}
        assert refused == set(reads) - set(OPEN_READS)
        assert all(answers[p].json()["error"]["code"] == "unauthorized" for p in refused)
        assert all(answers[p].status_code == 200 for p in OPEN_READS)
        assert client.get("/static/favicon.svg").status_code == 200
        token = {"Authorization": "Bearer beta-token"}
        assert client.get("/api/presets", headers=token).json()["items"][0]["name"] == "arith-demo"
        document = client.get("/openapi.json", headers=token).json()
        assert "/api/presets" in document["paths"]
        assert "/openapi.json" not in document["paths"]  # the document's own routes are not in it
        assert "localStorage" in client.get("/docs").text  # reads it with the stored token


def test_every_write_needs_a_token_when_tokens_are_set(locked: Stack) -> None:
    writes = [(method, path) for method, path in served_routes() if method != "GET"]
    assert ("POST", "/api/runs") in writes and ("POST", "/api/datasets") in writes
    with httpx.Client(base_url=locked.url, timeout=30) as client:
        answers = {(m, p): client.request(m, concrete(p)).status_code for m, p in writes}
    assert {route: status for route, status in answers.items() if status != 401} == {}
    assert httpx.get(f"{locked.url}/openapi.json").status_code == 200  # reads are open here


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
