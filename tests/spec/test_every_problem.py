"""A refused spec is one 422 listing every problem it has (issue 44, item 8): the JobSpec's
own rules' and this server's (paths, datasets, rewards, tools, trackers), through submit and
clone alike; and POST /api/specs/check, the new-run page's check as you type, answers the
same problems without storing anything, and warns apart of what submit accepts but cannot
learn (a model with random weights). The real app and store in the test process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.store_fixture import store

__all__ = ["store"]

SPEC = {"name": "problems", "model": "builtin:tiny", "max_steps": 2, "num_generations": 2}
UNINSTALLED = {"name": "python", "function": "no_such_reward"}
"""A reward function no entry point installs: only this server's check knows."""
UNKNOWN_DATASET = {"source": "dataset:0123456789abcdef"}
PROBLEMS = {
    # the JobSpec's rules refuse two fields...
    "num_generations": 1,
    "per_device_train_batch_size": 4,  # TRL's name, hinted
    # ...and this server two of the rest, which the rules accept
    "rewards": [{"name": "accuracy"}, UNINSTALLED],
    "data": UNKNOWN_DATASET,
}
EVERY_LOC = ["num_generations", "per_device_train_batch_size", "data.source", "rewards.1.function"]


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def locs(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    return [f["loc"] for f in response.json()["error"]["fields"]]


def test_submit_lists_every_problem_of_every_stage(api: TestClient) -> None:
    refused = api.post("/api/runs", json={**SPEC, **PROBLEMS})
    assert locs(refused) == EVERY_LOC
    message = refused.json()["error"]["message"]
    assert message.startswith("invalid job spec: num_generations: ")
    assert "TRL's per_device_train_batch_size is prompts_per_step" in message
    # the server's stages, all of them, on a spec the JobSpec's rules accept
    server_only = api.post(
        "/api/runs", json={**SPEC, "rewards": [UNINSTALLED], "data": UNKNOWN_DATASET}
    )
    assert locs(server_only) == ["data.source", "rewards.0.function"]
    assert api.get("/api/runs").json()["items"] == []  # nothing was stored


def test_clone_lists_every_problem_of_its_patched_spec(api: TestClient) -> None:
    submitted = api.post("/api/runs", json={**SPEC, "resources": {"queue": "parked"}})
    assert submitted.status_code == 201, submitted.text
    run_id = submitted.json()["id"]
    refused = api.post(f"/api/runs/{run_id}/clone", json={"patch": PROBLEMS})
    assert locs(refused) == EVERY_LOC


def test_the_check_answers_what_submit_would_and_stores_nothing(api: TestClient) -> None:
    checked = api.post("/api/specs/check", json={**SPEC, **PROBLEMS})
    assert checked.status_code == 200, checked.text
    problems = checked.json()["problems"]
    submitted = api.post("/api/runs", json={**SPEC, **PROBLEMS}).json()["error"]["fields"]
    assert problems == submitted
    # the new-run page's case: a group of one is refused before any submit
    one = api.post("/api/specs/check", json={**SPEC, "num_generations": 1}).json()["problems"]
    assert [p["loc"] for p in one] == ["num_generations"]
    assert api.post("/api/specs/check", json=SPEC).json()["problems"] == []
    assert api.get("/api/runs").json()["items"] == []
    assert locs(api.post("/api/specs/check", json=["not", "a", "spec"])) == ["(body)"]


def test_the_check_warns_of_a_model_that_cannot_learn_and_submit_takes_it(api: TestClient) -> None:
    random = {**SPEC, "model": "builtin:small"}
    checked = api.post("/api/specs/check", json=random).json()
    assert checked["problems"] == []
    (warning,) = checked["warnings"]
    assert warning["loc"] == "model"
    said = warning["message"]
    assert said.startswith("builtin:small has random weights: a run on it cannot learn")
    assert "use builtin:small-arith (trained; first use builds it, about 4 min)" in said
    # each random built-in names the trained one of its own size
    tiny_checked = api.post("/api/specs/check", json={**SPEC, "model": "builtin:tiny"}).json()
    (tiny,) = tiny_checked["warnings"]
    assert "use builtin:tiny-arith (trained; first use builds it, about 1 min)" in tiny["message"]
    # beside problems too, and never on a trained model
    both = api.post("/api/specs/check", json={**random, "num_generations": 1}).json()
    assert [p["loc"] for p in both["problems"]] == ["num_generations"] and both["warnings"]
    trained = {**SPEC, "model": "builtin:small-arith"}
    assert api.post("/api/specs/check", json=trained).json() == {"problems": [], "warnings": []}
    submitted = api.post("/api/runs", json={**random, "resources": {"queue": "parked"}})
    assert submitted.status_code == 201, submitted.text
