"""Every route in the test process: FastAPI's TestClient over the real app, the real store
(PostgreSQL and SQLite, freshly migrated) and the real filesystem broker, which nobody
consumes here, so runs stay queued. Seconds, not minutes: what needs separate processes
(workers, restarts, live streams, browsers) stays in the stack tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.store import checkpoints, db, runs, steps, workers
from app.store.lease import Lease
from app.store.models import RunStatus
from grpo.report import CompletionReport, GroupReport, SavedCheckpoint, StepReport
from tests.seed import METRIC_KEYS, seed_scalars
from tests.store_fixture import store

__all__ = ["store"]

SPEC = {"name": "inprocess", "model": "builtin:tiny", "max_steps": 4, "num_generations": 2}


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def step_report(step: int) -> StepReport:
    completion = CompletionReport(
        text="4", num_tokens=1, is_truncated=False, rewards={"accuracy": 1.0},
        reward=1.0, advantage=1.0, kl=0.0,
    )  # fmt: skip
    group = GroupReport(
        index=0, prompt_id="2+2", prompt="2+2=", answer="4", rewards=[1.0, 0.0],
        advantages=[1.0, -1.0], completions=[completion, completion], passes=[True, False],
    )  # fmt: skip
    return StepReport(step=step, total_steps=4, scalars={"reward": 0.5, "kl": 0.0}, groups=[group])


JSONL = {"content-type": "application/x-ndjson"}


def submit(api: TestClient, **overrides: object) -> str:
    response = api.post("/api/runs", json={**SPEC, **overrides})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    return dict(response.json()["error"])


def test_service_routes_answer(api: TestClient) -> None:
    health = api.get("/api/health").json()
    assert (health["status"], health["database"], health["broker"]) == ("ok", True, True)
    assert api.get("/api/presets").json()["items"][0]["name"] == "arith-demo"
    assert api.get("/api/workers").json() == {"items": []}  # none heard from
    assert api.get("/openapi.json").json()["components"]["schemas"]["RunStatus"]["enum"]


def test_workers_are_listed_with_the_devices_they_hold(api: TestClient) -> None:
    db.call(
        workers.report_worker,
        "gpu-box", queues="default,h100", device="cuda:0 (NVIDIA H100)", device_kind="cuda",
        devices=["0", "1", "2", "3"], engines=["native", "vllm"], free_memory_mb=80_000,
        run_id=None,
    )  # fmt: skip
    db.call(
        workers.report_worker,
        "laptop", queues="default", device="cpu", device_kind="cpu", devices=["0", "1"],
        free_memory_mb=None, run_id=None,
    )  # fmt: skip
    items = api.get("/api/workers").json()["items"]
    assert [(w["name"], w["device_kind"], w["devices"], w["queues"]) for w in items] == [
        ("gpu-box", "cuda", ["0", "1", "2", "3"], ["default", "h100"]),
        ("laptop", "cpu", ["0", "1"], ["default"]),
    ]
    assert [w["engines"] for w in items] == [["native", "vllm"], ["native"]]
    assert [(w["role"], w["serving"]) for w in items] == [("training", None)] * 2


def test_a_generation_worker_is_listed_with_what_it_serves(api: TestClient) -> None:
    """`grpo worker --generation` (worker/generation.py) reports no queue, its role, and the
    server it runs for a run (issue 41 item 2)."""
    serving = {"run_id": "r1", "model": "builtin:small", "url": "http://127.0.0.1:41234"}
    db.call(
        workers.report_worker,
        "gen-box", queues="", device="cpu", device_kind="cpu", devices=["0"],
        engines=["native", "vllm"], free_memory_mb=None, run_id="r1", role="generation",
        serving=serving,
    )  # fmt: skip
    [item] = api.get("/api/workers").json()["items"]
    assert (item["role"], item["queues"], item["run_id"], item["serving"]) == (
        "generation", [], "r1", serving,
    )  # fmt: skip


def test_a_run_is_submitted_listed_read_and_its_actions_answer(api: TestClient) -> None:
    run_id = submit(api)
    run = api.get(f"/api/runs/{run_id}").json()
    assert (run["status"], run["step"], run["total_steps"]) == ("queued", 0, 4)
    listed = api.get("/api/runs", params={"status": "queued"}).json()["items"]
    assert [r["id"] for r in listed] == [run_id]
    assert api.get("/api/runs", params={"status": "running"}).json()["items"] == []

    clone = api.post(f"/api/runs/{run_id}/clone", json={"patch": {"max_steps": 2}})
    assert clone.status_code == 201 and clone.json()["total_steps"] == 2
    assert api.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
    resumed = api.post(f"/api/runs/{run_id}/resume").json()
    assert (resumed["status"], resumed["resumes_from_step"]) == ("queued", 0)  # none saved
    assert api.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
    assert api.delete(f"/api/runs/{run_id}").status_code == 204
    assert error_of(api.get(f"/api/runs/{run_id}"), 404)["code"] == "not_found"


def test_a_resume_says_the_step_it_resumes_from(api: TestClient) -> None:
    run_id = submit(api)
    claimed = db.call(runs.claim_run, run_id, worker="w1", device="cpu")
    assert claimed is not None
    for step in (2, 4):  # the worker's checkpoints; the run then fails at step 5
        saved = SavedCheckpoint(step, f"/x/step-{step:06d}", 1, False, (2, 4)[: step // 2])
        db.call(checkpoints.record_checkpoint, Lease.of(claimed), saved)
    db.call(runs.finish_run, run_id, status=RunStatus.FAILED, error="reward raised")
    resumed = api.post(f"/api/runs/{run_id}/resume").json()
    assert (resumed["status"], resumed["resumes_from_step"]) == ("queued", 4)


def test_bad_requests_are_4xx_naming_what_is_wrong(api: TestClient) -> None:
    bad = error_of(api.post("/api/runs", json={**SPEC, "num_generations": 1}), 422)
    assert [f["loc"] for f in bad["fields"]] == ["num_generations"]
    assert error_of(api.get("/api/runs", params={"status": "paused"}), 422)["fields"]
    assert error_of(api.get("/api/runs", params={"cursor": "nope"}), 400)["code"] == "bad_cursor"
    run_id = submit(api)
    assert error_of(api.post(f"/api/runs/{run_id}/resume"), 409)
    assert error_of(api.delete(f"/api/runs/{run_id}"), 409)  # queued: cancel it first
    assert error_of(api.get("/api/runs/nope/metrics"), 404)
    assert error_of(api.get(f"/api/runs/{run_id}/steps/1/groups/0"), 404)
    assert error_of(api.get(f"/api/runs/{run_id}/steps/1/groups?filter=bogus"), 422)


def test_steps_read_back_through_every_step_route(api: TestClient) -> None:
    run_id = submit(api)
    for step in (1, 2):
        db.call(steps.save_step, run_id, step_report(step))
    metrics = api.get(f"/api/runs/{run_id}/metrics").json()
    assert [m["step"] for m in metrics["items"]] == [1, 2] and metrics["last_event_id"] > 0
    keyed = api.get(f"/api/runs/{run_id}/metrics", params={"keys": "kl", "after_step": 1})
    assert keyed.json()["items"] == [{"step": 2, "metrics": {"kl": 0.0}}]
    histograms = api.get(f"/api/runs/{run_id}/histograms", params={"limit": 1}).json()
    assert len(histograms["items"]) == 1 and set(histograms["bin_edges"]) == {
        "advantage_histogram", "reward_histogram", "group_reward_std_histogram",
    }  # fmt: skip

    groups = api.get(f"/api/runs/{run_id}/steps/2/groups").json()["items"]
    assert [(g["index"], g["outcome"]) for g in groups] == [(0, "mixed")]
    assert api.get(f"/api/runs/{run_id}/steps/2/groups?filter=all_pass").json()["items"] == []
    detail = api.get(f"/api/runs/{run_id}/steps/2/groups/0").json()
    assert [c["reward"] for c in detail["completions"]] == [1.0, 1.0]
    history = api.get(f"/api/runs/{run_id}/prompts/2+2").json()["items"]
    assert [g["step"] for g in history] == [1, 2]

    csv = api.get(f"/api/runs/{run_id}/export", params={"format": "csv"}).text
    assert csv.splitlines()[0].startswith("step") and len(csv.splitlines()) == 3
    export = api.get(f"/api/runs/{run_id}/export", params={"what": "groups", "format": "jsonl"})
    lines = export.text.splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2]
    assert isinstance(api.get(f"/api/runs/{run_id}/logs").json()["items"], list)


LONG = 20_000


def every_step(api: TestClient, run_id: str, **params: object) -> list[dict[str, Any]]:
    """Every row of the range, a page at a time, following next_after_step."""
    rows: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        query = {**params, "limit": 3000, **({"after_step": after} if after is not None else {})}
        page = api.get(f"/api/runs/{run_id}/metrics", params=query).json()
        rows += page["items"]
        assert page["thinned"] is None
        if page["next_after_step"] is None:
            return rows
        assert page["next_after_step"] == page["items"][-1]["step"]
        after = page["next_after_step"]


def test_a_long_runs_metrics_are_paged_every_step_exactly_once(api: TestClient) -> None:
    run_id = submit(api)
    seed_scalars(run_id, LONG, eval_every=500)
    steps = [row["step"] for row in every_step(api, run_id)]
    assert steps == list(range(1, LONG + 1))  # in order, each once, across 7 pages
    keyed = every_step(api, run_id, keys="kl,eval/accuracy", after_step=100, before_step=9001)
    assert [row["step"] for row in keyed] == list(range(101, 9001))
    assert {k for row in keyed for k in row["metrics"]} == {"kl", "eval/accuracy"}
    assert error_of(api.get(f"/api/runs/{run_id}/metrics", params={"limit": 10_001}), 422)
    both = api.get(f"/api/runs/{run_id}/metrics", params={"limit": 10, "max_points": 10})
    assert [row["step"] for row in both.json()["items"]] == list(range(1, 11)), "a page wins"


def test_a_long_runs_metrics_are_thinned_to_stored_steps_and_each_metrics_extremes(
    api: TestClient,
) -> None:
    run_id = submit(api)
    seed_scalars(run_id, LONG, eval_every=500)
    stored = {row["step"]: row["metrics"] for row in every_step(api, run_id)}
    url = f"/api/runs/{run_id}/metrics"

    plain = api.get(url)  # no parameters: the server's cap, 10,000 rows
    assert len(plain.json()["items"]) <= 10_000 and plain.json()["thinned"]["steps"] == LONG
    assert len(plain.content) < 0.6 * len(json.dumps(list(stored.values())))

    view = api.get(url, params={"max_points": 500}).json()
    rows = view["items"]
    assert len(rows) <= 500 and (rows[0]["step"], rows[-1]["step"]) == (1, LONG)
    assert all(row["metrics"] == stored[row["step"]] for row in rows), "rows as stored"
    kept = {row["step"] for row in rows}
    assert set(range(500, LONG + 1, 500)) <= kept, "a sparse metric keeps every point"
    thinned = view["thinned"]
    assert thinned["steps"] == LONG and thinned["buckets"] > 1
    size = thinned["bucket_steps"]
    for first in range(1, LONG + 1, size):  # each bucket's lowest and highest of each metric
        bucket = [(step, stored[step]) for step in range(first, min(first + size, LONG + 1))]
        for key in METRIC_KEYS:
            values = {m[key] for _, m in bucket}
            shown = {m[key] for step, m in bucket if step in kept}
            assert {min(values), max(values)} <= shown, (first, key)

    window = api.get(url, params={"after_step": 999, "before_step": 2001}).json()
    assert [row["step"] for row in window["items"]] == list(range(1000, 2001))
    assert window["thinned"] is None  # a zoom window the size of a chart: every step
    keyed = api.get(url, params={"max_points": 100, "keys": "reward"}).json()
    assert len(keyed["items"]) <= 100 and keyed["thinned"]["buckets"] >= 40
    assert {k for row in keyed["items"] for k in row["metrics"]} == {"reward"}


def test_a_dataset_is_uploaded_listed_and_a_bad_line_named(api: TestClient) -> None:
    body = b'{"prompt": "1+1=", "answer": "2"}\n{"prompt": "2+2=", "answer": "4"}\n'
    uploaded = api.post("/api/datasets", params={"name": "sums"}, content=body, headers=JSONL)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["num_records"] == 2
    assert [d["name"] for d in api.get("/api/datasets").json()["items"]] == ["sums"]
    bad_lines = b'{"prompt": "x"}\nnot json\n'
    bad = api.post("/api/datasets", params={"name": "bad"}, content=bad_lines, headers=JSONL)
    assert bad.status_code == 422 and "line" in bad.text


def test_a_spec_error_finishes_the_sentence(api: TestClient) -> None:
    """The 422 words fields as grpo train does (grpo/spec/hints.py; cases in
    tests/spec/test_spec_hints.py)."""
    error = error_of(api.post("/api/runs", json={"num_generation": 4, "bf16": True}), 422)
    fields = {f["loc"]: f["message"] for f in error["fields"]}
    assert "did you mean num_generations?" in fields["num_generation"]
    assert "TRL's bf16 is precision: bf16 here" in fields["bf16"]
    assert "did you mean num_generations?" in error["message"]


def test_a_jsonl_body_without_its_newlines_is_refused_saying_so(api: TestClient) -> None:
    """What `curl -d @file` sends: the records of a JSONL file on one line."""
    stripped = '{"prompt": "2+2=", "answer": "4"}{"prompt": "3+5=", "answer": "8"}'
    error = error_of(
        api.post("/api/datasets", params={"name": "joined"}, content=stripped, headers=JSONL), 422
    )
    assert error["message"].startswith("line 1: invalid JSON (Extra data); a second record")
    assert "--data-binary" in error["message"] and "grpo datasets upload" in error["message"]
    broken = error_of(
        api.post("/api/datasets", params={"name": "b"}, content='{"prompt": 1} x', headers=JSONL),
        422,
    )
    assert "--data-binary" not in broken["message"]  # extra data that is not a record


def test_eval_on_an_uploaded_dataset_names_a_held_out_source(api: TestClient) -> None:
    body = '{"prompt": "2+2=", "answer": "4"}\n{"prompt": "3+5=", "answer": "8"}\n'
    uploaded = api.post("/api/datasets", params={"name": "two"}, content=body, headers=JSONL)
    source = uploaded.json()["source"]
    error = error_of(api.post("/api/runs", json={**SPEC, "data": {"source": source},
                                                 "eval": {"every_steps": 2}}), 422)  # fmt: skip
    (field,) = error["fields"]
    assert field["loc"] == "eval"
    assert "eval.source" in field["message"] and "eval.holdout_fraction" in field["message"]
    submit(api, data={"source": source}, eval={"holdout_fraction": 0.5})
