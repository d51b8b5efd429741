"""Ownership of a run in the store: a claim returns a lease, and every write of a worker
is conditional on it; transitions are conditional updates that exactly one caller wins."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.store import dispatch, lease, runs, steps
from app.store.db import session_scope
from app.store.lease import Lease, LeaseLost
from app.store.models import Event, LogLine, Run, StepMetric, utcnow
from grpo.report import GroupReport, StepReport
from grpo.spec import JobSpec
from tests.integration.store_fixture import store

__all__ = ["store"]


def report(step: int) -> StepReport:
    group = GroupReport(
        index=0,
        prompt_id="q",
        prompt="1+1=",
        answer="2",
        rewards=[1.0, 0.0],
        advantages=[1, -1],
        passes=[True, False],
    )
    return StepReport(step=step, total_steps=4, scalars={"reward": 0.5}, groups=[group])


def new_run() -> Run:
    run, _ = runs.create_run(JobSpec(model="builtin:tiny", max_steps=4), package_version="t")
    return run


def claim(run_id: str, worker: str) -> Lease:
    run = runs.claim_run(run_id, worker=worker, device="cpu")
    assert run is not None
    return Lease.of(run)


def requeue_as_stale(run_id: str) -> None:
    requeued, _ = runs.requeue_stale_runs(stale_before=utcnow() + timedelta(hours=1), max_retries=9)
    assert [r.id for r in requeued] == [run_id]


def count(table: type, run_id: str, *where: object) -> int:
    with session_scope() as session:
        stmt = select(func.count()).select_from(table).where(table.run_id == run_id, *where)  # type: ignore[attr-defined]
        return int(session.scalar(stmt) or 0)


def test_a_worker_that_lost_its_run_writes_nothing_more(store: str) -> None:
    run = new_run()
    stale = claim(run.id, "w1")
    steps.save_step(run.id, report(1), lease=stale)
    requeue_as_stale(run.id)
    with pytest.raises(LeaseLost, match="no longer running"):  # requeued, not yet claimed
        lease.beat(stale)
    owner = claim(run.id, "w2")
    assert owner.token == stale.token + 1
    for write in (
        lambda: steps.save_step(run.id, report(2), lease=stale),
        lambda: lease.beat(stale),
        lambda: lease.check(stale),
        lambda: lease.add_log(stale, "info", "checkpoint saved"),
        lambda: lease.finish(stale, status="failed", error="boom"),
        lambda: lease.hand_back(stale, reason="stopping"),
    ):
        with pytest.raises(LeaseLost, match=f"claimed again by w2 \\(lease {owner.token}\\)"):
            write()
    assert count(StepMetric, run.id) == 1 and count(LogLine, run.id) == 0
    for step in (2, 3, 4):
        steps.save_step(run.id, report(step), lease=owner)
    assert lease.check(owner) is False
    lease.finish(owner, status="succeeded")
    with pytest.raises(LeaseLost):
        lease.finish(owner, status="failed")  # once final, nobody writes again
    assert count(StepMetric, run.id) == 4
    final = runs.get_run(run.id)
    assert final is not None and final.status == "succeeded" and final.step == 4
    with session_scope() as session:
        statuses = [
            p["status"]
            for p in session.scalars(
                select(Event.payload).where(Event.run_id == run.id, Event.kind == "status")
            )
        ]
    assert statuses == ["queued", "running", "queued", "running", "succeeded"]


def test_a_resume_never_gives_a_lost_worker_its_token_back(store: str) -> None:
    run = new_run()
    first = claim(run.id, "w1")
    requeue_as_stale(run.id)
    second = claim(run.id, "w2")
    lease.finish(second, status="failed", error="boom")
    assert runs.requeue_run(run.id) is not None  # attempts start again at 0 ...
    third = claim(run.id, "w3")
    assert runs.get_run(run.id).attempts == 1  # type: ignore[union-attr]
    assert third.token not in (first.token, second.token)  # ... the lease does not
    with pytest.raises(LeaseLost):
        lease.beat(first)


def test_of_concurrent_resumes_exactly_one_wins(store: str) -> None:
    run = new_run()
    runs.request_cancel(run.id)
    barrier = threading.Barrier(10)
    results: list[bool] = []

    def resume() -> None:
        barrier.wait()
        results.append(runs.requeue_run(run.id) is not None)

    threads = [threading.Thread(target=resume) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 9 + [True]


def test_the_sweep_takes_unsent_runs_at_once_and_sent_ones_after_the_bound(store: str) -> None:
    sent, unsent = new_run(), new_run()
    dispatch.mark_undispatched(unsent.id)
    now = utcnow()
    assert [r.id for r in dispatch.take_due(sent_before=now - timedelta(minutes=5))] == [unsent.id]
    assert dispatch.take_due(sent_before=now - timedelta(minutes=5)) == []  # stamped as sent
    later = utcnow() + timedelta(minutes=1)
    assert {r.id for r in dispatch.take_due(sent_before=later)} == {sent.id, unsent.id}
    claim(sent.id, "w1")
    runs.request_cancel(unsent.id)
    assert dispatch.take_due(sent_before=utcnow() + timedelta(hours=1)) == []
