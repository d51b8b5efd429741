"""Submit of a `vllm_mode: server` run with no server address (issue 41 item 2): accepted,
and stored as needing a generation worker (`grpo worker --generation`) where the service
allows a vLLM server host; with GRPO_VLLM_SERVER_HOSTS empty no worker could ever serve it,
a 422 naming vllm_server_base_url. A clone keeps the placement unless its patch gives an
address. A training worker leaves such a run queued, saying why, while no free generation
worker is listed. The real app, store and filesystem broker in the test process, as
tests/spec/test_vllm_server_hosts.py uses them; the placement on real processes is
tests/engines/test_generation_workers.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import get_settings
from app.store import db, runs, workers
from app.store.models import RunStatus
from grpo.spec.vllm import ADDRESS_FIELDS
from tests.store_fixture import store
from worker.job import run_job

__all__ = ["store"]

SPEC: dict[str, Any] = {
    "name": "generation-placed",
    "model": "builtin:small",
    "max_steps": 2,
    "num_generations": 2,
    "use_vllm": True,
    "vllm_mode": "server",
    "resources": {"queue": "parked-no-worker"},
}
SETTING = "GRPO_VLLM_SERVER_HOSTS"


@pytest.fixture
def api(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.delenv(SETTING, raising=False)
    monkeypatch.setenv("GRPO_DECLINE_PAUSE_SECONDS", "0")
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client
    get_settings.cache_clear()


def needs_generation(run_id: str) -> bool:
    run = db.call(runs.get_run, run_id)
    assert run is not None
    return run.needs_generation


def test_no_address_is_accepted_and_placed_on_a_generation_worker(api: TestClient) -> None:
    placed = api.post("/api/runs", json=SPEC)
    assert placed.status_code == 201, placed.text
    given = api.post("/api/runs", json={**SPEC, "vllm_server_base_url": "http://127.0.0.1:8011"})
    assert given.status_code == 201, given.text
    assert needs_generation(placed.json()["id"]) and not needs_generation(given.json()["id"])
    clone = api.post(f"/api/runs/{placed.json()['id']}/clone", json={"patch": {"max_steps": 3}})
    assert clone.status_code == 201, clone.text
    assert needs_generation(clone.json()["id"])
    patch = {"vllm_server_port": 8012}
    addressed = api.post(f"/api/runs/{placed.json()['id']}/clone", json={"patch": patch})
    assert addressed.status_code == 201, addressed.text
    assert not needs_generation(addressed.json()["id"])


def test_the_stored_spec_keeps_no_address_so_a_copy_of_it_is_placed_too(api: TestClient) -> None:
    """The new-run page's "edit as new" submits a run's stored spec: it must not come back
    pointed at TRL's default 0.0.0.0:8000."""
    placed = api.post("/api/runs", json=SPEC).json()
    assert not ADDRESS_FIELDS & placed["spec"].keys(), placed["spec"]
    copy = api.post("/api/runs", json={**placed["spec"], "name": "generation-placed (copy)"})
    assert copy.status_code == 201, copy.text
    assert needs_generation(copy.json()["id"])
    given = {**SPEC, "vllm_server_host": "127.0.0.1", "vllm_server_port": 8013}
    stored = api.post("/api/runs", json=given).json()["spec"]
    assert (stored["vllm_server_host"], stored["vllm_server_port"]) == ("127.0.0.1", 8013)
    assert stored["vllm_server_base_url"] is None  # given fields' neighbours are kept set


def test_no_address_is_refused_naming_the_field_where_no_server_host_is_allowed(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETTING, "")
    get_settings.cache_clear()
    response = api.post("/api/runs", json=SPEC)
    assert response.status_code == 422, response.text
    [field] = response.json()["error"]["fields"]
    assert field["loc"] == "vllm_server_base_url", field
    assert "no generation worker could start a vLLM server" in field["message"]
    assert SETTING in field["message"]


def test_a_training_worker_leaves_it_queued_while_no_generation_worker_is_free(
    api: TestClient,
) -> None:
    run_id = api.post("/api/runs", json=SPEC).json()["id"]
    run_job(run_id)
    run = db.call(runs.get_run, run_id)
    assert run is not None and run.status == RunStatus.QUEUED and run.attempts == 0
    logs = [m["message"] for m in api.get(f"/api/runs/{run_id}/logs").json()["items"]]
    assert any("no free generation worker (`grpo worker --generation`)" in m for m in logs), logs
    waiting = api.get(f"/api/runs/{run_id}").json()["waiting_for"]  # the same line
    assert waiting in logs and "no free generation worker" in waiting


def test_no_server_in_time_hands_the_run_back_then_fails_it_past_the_retries(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A free generation worker is listed but no server URL comes within vllm_server_timeout:
    one line, the run back in the queue; past GRPO_MAX_RETRIES claims it fails, not loops."""
    db.call(
        workers.report_worker, "gen@test", queues="", device="cpu", device_kind="cpu",
        devices=["0"], free_memory_mb=None, run_id=None, role="generation",
    )  # fmt: skip
    run_id = api.post("/api/runs", json={**SPEC, "vllm_server_timeout": 1}).json()["id"]
    run_job(run_id)
    run = db.call(runs.get_run, run_id)
    assert run is not None and (run.status, run.attempts) == (RunStatus.QUEUED, 1)
    logs = [m["message"] for m in api.get(f"/api/runs/{run_id}/logs").json()["items"]]
    words = "handed the run back: no generation worker's vLLM server answered within "
    assert [m for m in logs if words in m] == [m for m in logs if "handed the run back" in m]
    assert len([m for m in logs if words in m]) == 1, logs
    monkeypatch.setenv("GRPO_MAX_RETRIES", "1")
    get_settings.cache_clear()
    run_job(run_id)
    run = db.call(runs.get_run, run_id)
    assert run is not None and (run.status, run.attempts) == (RunStatus.FAILED, 2)
    assert run.error is not None and "gave up after 1 retries" in run.error, run.error
