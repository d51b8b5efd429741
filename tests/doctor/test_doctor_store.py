"""The run doctor through the real store and routes, in this process (PostgreSQL and
SQLite): findings written with a step under the worker's lease, caught up on a resumed
run, diagnosed from the stored steps on the first read, served, marked in the runs list,
and sent as `diagnosis` events; a long stored run diagnosed a stretch at a time, from a
doctor kept in the store, to the findings one pass over it finds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from app.main import create_app
from app.store import db, findings, runs, steps
from app.store.lease import Lease
from app.store.models import Diagnosis, Event, Finding, RunStatus
from grpo.doctor import RULES_VERSION, diagnose
from grpo.report import CompletionReport, GroupReport, StepReport
from grpo.spec import JobSpec
from tests.doctor.test_async_findings import SLOW_TRAINER, async_demo_rows
from tests.seed import seed_scalars
from tests.store_fixture import _clear_caches, store
from worker.run_doctor import RunDoctor
from worker.run_writes import RunWrites

__all__ = ["store"]

SPEC = {"name": "doctor", "model": "builtin:tiny", "max_steps": 20, "num_generations": 2,
        "max_completion_length": 2}  # fmt: skip


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def report(step: int, *, cut: float) -> StepReport:
    """A step whose completions were cut at the limit in share `cut` (group 1 is cut)."""
    completion = CompletionReport(
        text="1", num_tokens=2, is_truncated=cut > 0, rewards={"accuracy": 0.0},
        reward=0.0, advantage=0.0, kl=0.0,
    )  # fmt: skip
    groups = [
        GroupReport(index=i, prompt_id=f"p{i}", prompt=f"0{i}+01=", answer=str(i + 1),
                    rewards=[1.0, 0.0], advantages=[1.0, -1.0], passes=[True, False],
                    completions=[completion, completion] if i == 1 else None)
        for i in range(2)
    ]  # fmt: skip
    scalars = {"completions/clipped_ratio": cut, "reward": 0.5, "frac_reward_zero_std": 0.0}
    return StepReport(step=step, total_steps=20, scalars=scalars, groups=groups)


def diagnosis_events(run_id: str) -> list[dict[str, object]]:
    with db.session() as session:
        rows = session.scalars(
            select(Event.payload).where(Event.run_id == run_id, Event.kind == "diagnosis")
            .order_by(Event.id)
        )  # fmt: skip
        return list(rows)


def submit(api: TestClient) -> str:
    response = api.post("/api/runs", json=SPEC)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_a_stored_run_is_diagnosed_on_first_read_served_and_marked(api: TestClient) -> None:
    run_id = submit(api)
    for step in range(1, 8):
        db.call(steps.save_step, run_id, report(step, cut=0.9 if step >= 3 else 0.0))
    db.call(runs.finish_run, run_id, status=RunStatus.SUCCEEDED)
    body = api.get(f"/api/runs/{run_id}/diagnostics").json()
    # the 5-step mean of the cut share reaches 0.5 (critical) at step 5: (0 + 0 + 3 * 0.9) / 5
    assert body["step"] == 7 and [f["id"] for f in body["items"]] == ["truncation@5"]
    finding = body["items"][0]
    assert (finding["severity"], finding["status"], finding["last_step"]) == ("critical", "open", 7)
    assert {s["field"]: s["value"] for s in finding["suggestions"]} == {
        "max_completion_length": 4, "mask_truncated_completions": True}  # fmt: skip
    assert finding["evidence"]["groups"] == [
        {"step": 7, "index": 1, "note": "2 of 2 cut at the limit"}
    ]
    assert [v[0] for v in finding["evidence"]["values"]] == list(range(1, 8))
    assert [e["id"] for e in diagnosis_events(run_id)] == ["truncation@5"]
    mark = {"open": 1, "severity": "critical"}
    assert api.get(f"/api/runs/{run_id}").json()["doctor"] == mark
    listed = {r["id"]: r["doctor"] for r in api.get("/api/runs").json()["items"]}
    assert listed[run_id] == mark
    api.get(f"/api/runs/{run_id}/diagnostics")  # current: nothing written again
    with db.session() as session:  # as if the rules changed since: diagnosed again, same result
        session.execute(update(Diagnosis).where(Diagnosis.run_id == run_id).values(rules_version=0))
    assert api.get(f"/api/runs/{run_id}/diagnostics").json()["items"] == body["items"]
    assert len(diagnosis_events(run_id)) == 1
    assert api.delete(f"/api/runs/{run_id}").status_code == 204
    with db.session() as session:  # gone with the run, foreign keys enforced or not
        assert session.scalar(select(func.count()).select_from(Finding)) == 0
        assert session.get(Diagnosis, run_id) is None


def test_the_worker_writes_findings_with_its_steps_and_a_resumed_run_catches_up(
    api: TestClient,
) -> None:
    run_id = submit(api)
    spec = JobSpec.model_validate(SPEC)
    held = Lease.of(db.call(runs.claim_run, run_id, worker="w", device="cpu"))
    doctor = RunDoctor(spec, RunWrites(held))
    for step in range(1, 7):
        doctor.save_step(report(step, cut=0.9 if step >= 3 else 0.0))
    assert api.get(f"/api/runs/{run_id}/diagnostics").json()["items"][0]["id"] == "truncation@5"
    # the worker loses the run at step 6; the next one resumes from a checkpoint at step 2,
    # where nothing was cut: it replays steps 3-6 without cuts, and the finding is withdrawn
    db.call(runs.finish_run, run_id, status=RunStatus.FAILED)
    db.call(runs.requeue_run, run_id)
    held = Lease.of(db.call(runs.claim_run, run_id, worker="w2", device="cpu"))
    resumed = RunDoctor(spec, RunWrites(held))
    for step in range(3, 7):
        resumed.save_step(report(step, cut=0.0))
    assert api.get(f"/api/runs/{run_id}/diagnostics").json() == {
        "step": 6, "rules_version": RULES_VERSION, "is_current": True, "items": []}  # fmt: skip
    assert [(e["id"], e.get("status")) for e in diagnosis_events(run_id)] == [
        ("truncation@5", "open"), ("truncation@5", "withdrawn")]  # fmt: skip
    assert api.get(f"/api/runs/{run_id}").json()["doctor"] is None


LONG = 12_000  # six stretches of findings.STRETCH_STEPS


def findings_of(run_id: str) -> list[dict[str, object]]:
    return db.call(findings.list_findings, run_id)[1]


def stored_state(run_id: str) -> dict[str, Any] | None:
    with db.session() as session:
        diagnosed = session.get(Diagnosis, run_id)
        return json.loads(diagnosed.state) if diagnosed and diagnosed.state else None


def seeded(api: TestClient, total: int) -> str:
    """A finished run of `total` steps of random scalars (the same for every call), stored
    without findings: as a run trained before the doctor, or diagnosed by older rules."""
    run_id = submit(api)
    seed_scalars(run_id, total, eval_every=50)
    db.call(runs.finish_run, run_id, status=RunStatus.SUCCEEDED)
    return run_id


def test_a_long_runs_first_read_costs_one_stretch_and_ends_as_one_pass_over_it(
    api: TestClient,
) -> None:
    run_id, reference = seeded(api, LONG), seeded(api, LONG)
    # the old way: every stored step through one doctor, in one transaction
    assert db.call(findings.diagnose_stored, reference, max_steps=10 * LONG)
    expected = findings_of(reference)
    assert len(expected) > 100, "the random scalars open and settle many episodes"
    rows = db.read(steps.list_metrics, reference)
    pure = diagnose(JobSpec.model_validate(SPEC), ((r["step"], r["metrics"]) for r in rows))
    assert sorted((f["id"], f["status"], f["last_step"]) for f in expected) == sorted(
        (f.id, f.status, f.last_step) for f in pure
    )

    first = api.get(f"/api/runs/{run_id}/diagnostics").json()
    assert (first["step"], first["is_current"]) == (findings.STRETCH_STEPS, False)
    # the rest was diagnosed after that answer (TestClient waits for it), a stretch at a time
    later = api.get(f"/api/runs/{run_id}/diagnostics").json()
    assert (later["step"], later["is_current"]) == (LONG, True)
    assert later["items"] == expected
    assert findings_of(run_id) == expected
    assert stored_state(run_id)["step"] == LONG  # type: ignore[index]


def test_the_stored_doctor_outlives_the_api_and_a_rewritten_step_starts_it_over(
    api: TestClient,
) -> None:
    run_id, reference = seeded(api, LONG // 2), seeded(api, LONG // 2)
    assert db.call(findings.diagnose_stored, reference, max_steps=10 * LONG)
    for _ in range(2):
        assert not db.call(findings.diagnose_stored, run_id, max_steps=1000)
    assert stored_state(run_id)["step"] == 2000  # type: ignore[index]
    _clear_caches()  # a new API process: nothing of the doctor is left in memory
    with TestClient(create_app(), base_url="http://localhost"):
        assert not db.call(findings.diagnose_stored, run_id, max_steps=1000)
    assert stored_state(run_id)["step"] == 3000, "it went on from step 2000"  # type: ignore[index]

    # a resumed run rewrites a step the doctor read: its state is dropped, and the next
    # stretch starts from the first step again
    step_10 = db.read(steps.list_metrics, run_id, after_step=9, limit=1)[0]["metrics"]
    db.call(steps.save_step, run_id, StepReport(step=10, total_steps=6000, scalars=step_10))
    assert stored_state(run_id) is None
    assert not db.call(findings.diagnose_stored, run_id, max_steps=1000)
    assert stored_state(run_id)["step"] == 1000  # type: ignore[index]
    while not db.call(findings.diagnose_stored, run_id, max_steps=1000):
        pass
    assert findings_of(run_id) == findings_of(reference)
    with db.session() as session:  # as if the rules changed: diagnosed again, the same
        session.execute(update(Diagnosis).where(Diagnosis.run_id == run_id).values(rules_version=0))
    while not api.get(f"/api/runs/{run_id}/diagnostics").json()["is_current"]:
        pass
    assert findings_of(run_id) == findings_of(reference)


def test_an_async_runs_steps_written_by_the_worker_serve_its_asynchrony_finding(
    api: TestClient,
) -> None:
    """The recorded async run whose trainer is the slower side (tests/data), written step by
    step as the worker writes it: generator_starved is stored, served and marked."""
    knobs = {"async_generation": True, "max_staleness": 4, "num_iterations": 4, "max_steps": 40}
    response = api.post("/api/runs", json={**SPEC, **knobs})
    assert response.status_code == 201, response.text
    run_id, spec = str(response.json()["id"]), JobSpec.model_validate({**SPEC, **knobs})
    held = Lease.of(db.call(runs.claim_run, run_id, worker="w", device="cpu"))
    doctor = RunDoctor(spec, RunWrites(held))
    for step, metrics in async_demo_rows(SLOW_TRAINER):
        doctor.save_step(StepReport(step=step, total_steps=40, scalars=metrics, groups=[]))
    items = api.get(f"/api/runs/{run_id}/diagnostics").json()["items"]
    assert [(f["id"], f["severity"]) for f in items] == [("generator_starved@11", "info")]
    assert items[0]["evidence"]["metric"] == "async/generator_busy"
    assert {s["field"]: s["value"] for s in items[0]["suggestions"]} == {
        "max_staleness": 1, "num_iterations": 2}  # fmt: skip
    assert [e["id"] for e in diagnosis_events(run_id)][0] == "generator_starved@11"
