"""`resources.num_nodes` through the API (issue 42 item 1): the spec says how many machines a
run spans, with `num_processes` ranks on each. A run of several nodes is queued for a gang
of workers (worker/gang.py; its task is sent once per node: tests/worker/test_gang.py),
unless the workers this service has could never hold it (a 422 naming the field:
app/api/checks/nodes.py); while queued, `waiting_for` says what it waits for. In the test
process over the real app and store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import get_settings
from app.store import db, nodes, runs, workers
from grpo.spec import JobSpec
from tests.store_fixture import store
from worker.job import run_job

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


def report(name: str, *, address: str | None, devices: int = 2) -> None:
    """A training worker's row, as its beat writes it (worker/lifecycle.py)."""
    db.call(
        workers.report_worker, name, queues="default", device="cpu", device_kind="cpu",
        devices=[str(i) for i in range(devices)], free_memory_mb=None, run_id=None,
        address=address,
    )  # fmt: skip


REFUSED = (
    "is 2, but only 1 of this service's 3 training workers could hold a node: one worker a "
    "node, each with GRPO_WORKER_ADDRESS set, listening on queue 'default' and holding at "
    "least 2 devices (resources.num_processes; GET /api/workers lists them); start 1 more "
    "such worker or lower num_nodes"
)


def test_a_run_no_set_of_workers_could_hold_is_refused_naming_num_nodes(api: TestClient) -> None:
    report("w1", address="10.0.0.1")
    report("w2", address=None)  # no address: no node
    report("w3", address="10.0.0.3", devices=1)  # too few devices for 2 ranks a node
    refused = api.post("/api/runs", json=TWO_NODES)
    assert refused.status_code == 422, refused.text
    fields = refused.json()["error"]["fields"]
    assert fields == [{"loc": "resources.num_nodes", "message": REFUSED}]
    checked = api.post("/api/specs/check", json=TWO_NODES).json()["problems"]
    assert checked == fields  # the new-run page's live check says it before submit
    assert api.get("/api/runs").json()["items"] == []  # nothing queued

    # one node a worker of one device fits them both; a run of one node is never checked
    one_rank = {**TWO_NODES, "resources": {"num_nodes": 2, "num_processes": 1}}
    assert api.post("/api/runs", json=one_rank).status_code == 201
    one_node = {**TWO_NODES, "resources": {"num_nodes": 1, "num_processes": 2}}
    assert api.post("/api/runs", json=one_node).status_code == 201

    report("w4", address="10.0.0.4")
    fits = api.post("/api/runs", json=TWO_NODES)
    assert fits.status_code == 201, fits.text
    assert fits.json()["status"] == "queued"
    listed = {w["name"]: w["address"] for w in api.get("/api/workers").json()["items"]}
    assert listed == {"w1": "10.0.0.1", "w2": None, "w3": "10.0.0.3", "w4": "10.0.0.4"}


def test_a_queued_run_says_what_it_waits_for_until_it_is_claimed(api: TestClient) -> None:
    run_id = api.post("/api/runs", json=TWO_NODES).json()["id"]  # no worker listed: queued
    assert api.get(f"/api/runs/{run_id}").json()["waiting_for"] is None
    db.call(nodes.claim_node, run_id, worker="w1", address="10.0.0.1:29500", ttl_seconds=60)
    said = "1 of 2 nodes claimed: waiting for 1 more worker holding 2 devices"
    assert api.get(f"/api/runs/{run_id}").json()["waiting_for"] == said
    [listed] = api.get("/api/runs").json()["items"]
    assert listed["waiting_for"] == said
    db.call(nodes.claim_node, run_id, worker="w2", address="10.0.0.2:29500", ttl_seconds=60)
    assert api.get(f"/api/runs/{run_id}").json()["waiting_for"] is None  # the gang is whole
    assert db.call(runs.claim_run, run_id, worker="w1", device="cpu") is not None
    assert api.get(f"/api/runs/{run_id}").json()["waiting_for"] is None


def test_a_worker_without_an_address_says_why_it_leaves_the_run_queued(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own path (worker/job.py), in this process: it declines the run and
    stores its reason as what the run waits for."""
    monkeypatch.setenv("GRPO_DECLINE_PAUSE_SECONDS", "0")
    get_settings.cache_clear()
    run_id = api.post("/api/runs", json=TWO_NODES).json()["id"]
    run_job(run_id)
    run = api.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "queued"
    assert run["waiting_for"].endswith(
        "left this run queued: resources.num_nodes is 2 but this worker has no "
        "GRPO_WORKER_ADDRESS (the address other machines reach it by), so it takes no node "
        "of a run on several machines"
    )
