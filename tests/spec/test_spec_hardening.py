"""Issue 38 (items 2, 3 and 7's spec part): every value the hostile probe sent in a JobSpec
is a 422 naming the field, through `POST /api/runs` and through `clone` alike, and never a
500; and a spec written straight to the store (an older or hand-made row) is refused again
on the worker, naming the same field.

The real app, store and filesystem broker in the test process (FastAPI's TestClient), as
tests/tools/test_tool_checks.py and tests/api/test_api_inprocess.py use them; the deep bodies
also go to the real server (uvicorn, tests/stack.py), where the probe saw the connection
reset.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from huggingface_hub import constants
from sqlalchemy import update

from app.main import create_app
from app.settings import get_settings
from app.store import db, runs
from app.store.models import Run, RunStatus
from tests.stack import Stack
from tests.store_fixture import store
from worker.job import run_job

__all__ = ["store"]

HOST = "127.0.0.1:18999"
"""The one endpoint host this server allows, for rewards and tools."""
SPEC: dict[str, Any] = {
    "name": "hardening",
    "model": "builtin:tiny-tools",
    "max_steps": 2,
    "num_generations": 2,
    "resources": {"queue": "parked-no-worker"},
}
MALFORMED_NETLOCS = [
    "127.0.0.1:+18999",
    "127.0.0.1:18999:80",
    "127.0.0.1:\uff11\uff18\uff19\uff19\uff19",  # full-width digits
    "127.0.0.1:-1",
    "127.0.0.1:65536",
    "127.0.0.1:018999",
    "127.0.0.1:0",
    "127.0.0.1:",
    "[127.0.0.1]",
    "[127.0.0.1]:18999",
    "127.0.0.1%40evil.example:18999",
    "evil%40127.0.0.1:18999",
    "127.0.0.1:18999%40evil.example",
    "127.1:18999",
    "\uff11\uff12\uff17.0.0.1:18999",
]
"""What the probe sent as a tool's (and a reward's) host and port, and their kin."""


def http_tool(url: str = f"http://{HOST}/call", **fields: object) -> dict[str, object]:
    return {"name": "http", "label": "search", "url": url, "description": "Search.", **fields}


def nested(levels: int) -> dict[str, Any]:
    """An object `levels` deep: {"a": {"a": ... {}}}."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def _cases() -> Iterator[tuple[str, dict[str, Any], str]]:
    """(what, spec fields, the field the 422 names) for every reproducer of the probe."""
    for netloc in MALFORMED_NETLOCS:
        url = f"http://{netloc}/x"
        yield f"tool {netloc}", {"tools": [http_tool(url)]}, "tools.0.http.url"
        yield f"reward {netloc}", {"rewards": [{"name": "http", "url": url}]}, "rewards.0.http.url"
    for levels in (33, 250, 300, 500):
        yield (
            f"parameters {levels} deep",
            {"tools": [http_tool(parameters=nested(levels))]},
            "tools.0.http.parameters",
        )
    yield (
        "parameters over 100,000 characters",
        {"tools": [http_tool(parameters={"description": "x" * 100_001})]},
        "tools.0.http.parameters",
    )
    for field, value in [("max_steps", True), ("max_steps", "2"), ("num_generations", "4"),
                         ("seed", False)]:  # fmt: skip
        yield f"{field}={value!r}", {field: value}, field
    yield "lora.r=true", {"lora": {"r": True}}, "lora.r"
    for field in ("top_k", "warmup_steps", "save_steps", "kl_horizon", "ref_model_sync_steps"):
        yield f"{field}=1e30", {field: 10**30}, field
    yield (
        "length.max_length=1e30",
        {"rewards": [{"name": "length", "max_length": 10**30}]},
        "rewards.0.length.max_length",
    )
    yield "eval.source builtin:../x", {"eval": {"source": "builtin:../x"}}, "eval.source"
    yield (
        "reward model hub id",
        {"rewards": [{"name": "model", "model": "nobody/none"}]},
        "rewards.0.model",
    )
    yield (
        "eval reward model hub id",
        {"eval": {"rewards": [{"name": "model", "model": "hf:nobody/none"}]}},
        "eval.rewards.0.model",
    )


CASES = list(_cases())


@pytest.fixture
def api(store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app, allowing HOST for rewards and tools; the Hugging Face cache empty and the
    hub offline, so a hub id is refused at once."""
    monkeypatch.setenv("GRPO_REWARD_HOSTS", HOST)
    monkeypatch.setenv("GRPO_TOOL_HOSTS", HOST)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client
    get_settings.cache_clear()


def the_field(response: Any) -> str:
    """The one field a 422 names, or what came instead."""
    if response.status_code != 422:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    fields = response.json()["error"]["fields"]
    return str(fields[0]["loc"]) if len(fields) == 1 else f"fields {fields}"


def submit_base_run(api: TestClient) -> str:
    """A valid run, with an http tool and an http reward, for clone to patch."""
    spec = {
        **SPEC,
        "tools": [http_tool()],
        "rewards": [{"name": "http", "url": f"http://{HOST}/s"}],
    }
    response = api.post("/api/runs", json=spec)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_every_hostile_value_is_a_422_naming_its_field_at_submit_and_through_clone(
    api: TestClient,
) -> None:
    """One store for the whole table (a freshly migrated database takes seconds): every
    case is sent both ways, and every answer that is not the 422 expected is listed."""
    base = submit_base_run(api)
    wrong = {}
    for what, fields, loc in CASES:
        submitted = the_field(api.post("/api/runs", json={**SPEC, **fields}))
        cloned = the_field(api.post(f"/api/runs/{base}/clone", json={"patch": fields}))
        for route, answer in (("submit", submitted), ("clone", cloned)):
            if answer != loc:
                wrong[f"{route} {what}"] = answer
    assert not wrong, json.dumps(wrong, indent=1, ensure_ascii=False)


def deep_body(levels: int) -> bytes:
    """A submit body whose tool parameters are `levels` deep, written as text: json.dumps
    itself gives up near 1,000 levels."""
    tool = json.dumps(http_tool())[:-1] + ', "parameters": '
    parameters = '{"a": ' * (levels - 1) + "{}" + "}" * (levels - 1)
    return (json.dumps({**SPEC, "tools": []})[:-3] + "[" + tool + parameters + "}]}").encode()


def test_deep_bodies_are_a_4xx_and_what_the_rules_allow_is_still_accepted(
    api: TestClient,
) -> None:
    """Up to the depth Python's JSON parser reaches (about 980 levels in the request's
    stack) a 422 naming the field; past it FastAPI's 400 for a body it cannot parse; the
    app answers on either way. At the bounds, specs are accepted."""
    tools = [
        http_tool(parameters=nested(32)),
        http_tool(f"http://{HOST.upper()}", label="bare"),
        http_tool(f"https://{HOST}/a/b?q=1#f", label="query"),
    ]
    spec = {**SPEC, "tools": tools, "max_steps": 2.0, "top_k": 1_048_576, "save_steps": 10**9}
    response = api.post("/api/runs", json=spec)
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["max_steps"] == 2
    base = submit_base_run(api)
    headers = {"content-type": "application/json"}
    for levels in (300, 500, 5000):
        submitted = api.post("/api/runs", content=deep_body(levels), headers=headers)
        patch = b'{"patch": ' + deep_body(levels) + b"}"
        cloned = api.post(f"/api/runs/{base}/clone", content=patch, headers=headers)
        for response in (submitted, cloned):
            if levels < 900:
                assert the_field(response) == "tools.0.http.parameters", levels
            else:
                assert response.status_code == 400, response.text
                assert "parsing the body" in response.json()["error"]["message"]
        assert api.get(f"/api/runs/{base}").status_code == 200


def test_deep_bodies_leave_the_real_servers_connection_open(embedded_stack: Stack) -> None:
    """Over uvicorn, where the probe saw a 500 and then a reset connection: each answer is
    a 4xx, and the same connection goes on to answer the next request. The store plays no
    part here: the embedded stack alone."""
    with embedded_stack.client() as client:
        for levels in (300, 500, 5000):
            response = client.post(
                "/api/runs", content=deep_body(levels), headers={"content-type": "application/json"}
            )
            assert 400 <= response.status_code < 500, (levels, response.text)
            assert client.get("/api/health").status_code == 200


def _store_spec(run_id: str, change: dict[str, Any]) -> None:
    """Write the run's spec with `change` merged in, as an older server or a hand-made row
    could have left it: no API check in the way."""
    with db.session() as session:
        stored = dict(session.get(Run, run_id).spec)  # type: ignore[union-attr]
        session.execute(update(Run).where(Run.id == run_id).values(spec={**stored, **change}))
        session.commit()


STORED: list[tuple[str, dict[str, Any], str]] = [
    ("tool url", {"tools": [http_tool("http://127.0.0.1:+18999/x")]}, "tools.0.http.url"),
    (
        "reward url",
        {"rewards": [{"name": "http", "url": "http://[127.0.0.1]:18999/s"}]},
        "rewards.0.http.url",
    ),
    # 250 levels: what the server before these rules accepted and stored
    ("parameters", {"tools": [http_tool(parameters=nested(250))]}, "tools.0.http.parameters"),
    ("max_steps", {"max_steps": "2"}, "max_steps"),
]


def test_the_worker_refuses_a_stored_spec_that_breaks_the_rules(api: TestClient) -> None:
    """The worker claims each run and fails it, naming the field, before anything is
    loaded or called (worker/job.py reads the spec with the same JobSpec)."""
    for what, change, loc in STORED:
        run_id = submit_base_run(api)
        _store_spec(run_id, change)
        run_job(run_id)
        run = db.call(runs.get_run, run_id)
        assert run is not None and run.status == RunStatus.FAILED, what
        assert loc in (run.error or ""), (what, run.error)
        assert api.get(f"/api/runs/{run_id}").status_code == 200, what
