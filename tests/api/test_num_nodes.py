"""`resources.num_nodes` through the API (issue 42 item 1): the spec says how many machines a
run spans, with `num_processes` ranks on each. A run of several nodes is queued for a gang
of workers (worker/gang.py; its task is sent once per node: tests/worker/test_gang.py). In
the test process over the real app and store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from grpo.spec import JobSpec
from tests.store_fixture import store

__all__ = ["store"]

SPEC = {"name": "nodes", "model": "builtin:tiny", "max_steps": 2, "num_generations": 2}
TWO_NODES = {**SPEC, "prompts_per_step": 4, "resources": {"num_nodes": 2, "num_processes": 2}}


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def test_a_run_of_several_nodes_is_queued_for_a_gang_of_workers(api: TestClient) -> None:
    checked = api.post("/api/specs/check", json=TWO_NODES).json()["problems"]
    assert checked == []
    run = api.post("/api/runs", json=TWO_NODES)
    assert run.status_code == 201, run.text
    assert run.json()["status"] == "queued"
    assert run.json()["spec"]["resources"]["num_nodes"] == 2

    # one node, said or not, is a run as before; a clone changes the node count freely
    one = api.post("/api/runs", json={**TWO_NODES, "resources": {"num_nodes": 1}})
    assert one.status_code == 201, one.text
    assert one.json()["spec"]["resources"]["num_nodes"] == 1
    patch = {"resources": {"num_nodes": 2}}
    cloned = api.post(f"/api/runs/{one.json()['id']}/clone", json={"patch": patch})
    assert cloned.status_code == 201, cloned.text
    assert cloned.json()["spec"]["resources"]["num_nodes"] == 2


def test_ranks_in_all_are_counted_over_the_nodes(api: TestClient) -> None:
    too_many = {**SPEC, "prompts_per_step": 3, "resources": {"num_nodes": 2, "num_processes": 2}}
    fields = api.post("/api/runs", json=too_many).json()["error"]["fields"]
    assert [f["loc"] for f in fields] == ["resources"]
    assert (
        "num_processes (2) x num_nodes (2) must be at most prompts_per_step (3)"
        in (fields[0]["message"])
    )
    zero = api.post("/api/runs", json={**SPEC, "resources": {"num_nodes": 0}})
    assert [f["loc"] for f in zero.json()["error"]["fields"]] == ["resources.num_nodes"]


def test_the_schema_changes_by_the_one_field(api: TestClient) -> None:
    resources = JobSpec.model_json_schema()["$defs"]["ResourcesSpec"]["properties"]
    assert list(resources) == [
        "queue", "min_free_memory_gb", "num_processes", "num_nodes", "sharding",
    ]  # fmt: skip
    nodes = resources["num_nodes"]
    assert (nodes["default"], nodes["minimum"], nodes["maximum"]) == (1, 1, 64)
    assert "--nnodes" in nodes["description"] and "num_machines" in nodes["description"]
    served = api.get("/openapi.json").json()["components"]["schemas"]
    assert served["ResourcesSpec"]["properties"]["num_nodes"]["default"] == 1
