"""Ownership of a run in the store: a claim returns a lease, and every write of a worker
is conditional on it; transitions are conditional updates that exactly one caller wins."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.store import db, dispatch, lease, runs, steps
from app.store.lease import Lease, LeaseLost
from app.store.models import Event, LogLine, Run, StepMetric, utcnow
from grpo.report import GroupReport, StepReport
from grpo.spec import JobSpec
from tests.store_fixture import session, store

__all__ = ["session", "store"]


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


def new_run(session: Session) -> Run:
    run, _ = runs.create_run(
        session, JobSpec(model="builtin:tiny", max_steps=4), package_version="t"
    )
    return run


def claim(session: Session, run_id: str, worker: str) -> Lease:
    run = runs.claim_run(session, run_id, worker=worker, device="cpu")
    assert run is not None
    return Lease.of(run)


def requeue_as_stale(session: Session, run_id: str) -> None:
    requeued, _ = runs.requeue_stale_runs(
        session, stale_before=utcnow() + timedelta(hours=1), max_retries=9
    )
    assert [r.id for r in requeued] == [run_id]


def count(table: type, run_id: str, *where: object) -> int:
    with db.session() as reader:
        stmt = select(func.count()).select_from(table).where(table.run_id == run_id, *where)  # type: ignore[attr-defined]
        return int(reader.scalar(stmt) or 0)


def test_a_worker_that_lost_its_run_writes_nothing_more(session: Session) -> None:
    run = new_run(session)
    stale = claim(session, run.id, "w1")
    steps.save_step(session, run.id, report(1), lease=stale)
    requeue_as_stale(session, run.id)
    with pytest.raises(LeaseLost, match="no longer running"):  # requeued, not yet claimed
        lease.beat(session, stale)
    owner = claim(session, run.id, "w2")
    assert owner.token == stale.token + 1
    for write in (
        lambda: steps.save_step(session, run.id, report(2), lease=stale),
        lambda: lease.beat(session, stale),
        lambda: lease.check(session, stale),
        lambda: lease.add_log(session, stale, "info", "checkpoint saved"),
        lambda: lease.finish(session, stale, status="failed", error="boom"),
        lambda: lease.hand_back(session, stale, reason="stopping"),
    ):
        with pytest.raises(LeaseLost, match=f"claimed again by w2 \\(lease {owner.token}\\)"):
            write()
    assert count(StepMetric, run.id) == 1 and count(LogLine, run.id) == 0
    for step in (2, 3, 4):
        steps.save_step(session, run.id, report(step), lease=owner)
    assert lease.check(session, owner) is False
    lease.finish(session, owner, status="succeeded")
    with pytest.raises(LeaseLost):
        lease.finish(session, owner, status="failed")  # once final, nobody writes again
    assert count(StepMetric, run.id) == 4
    final = runs.get_run(session, run.id)
    assert final is not None and final.status == "succeeded" and final.step == 4
    with db.session() as reader:
        statuses = [
            p["status"]
            for p in reader.scalars(
                select(Event.payload).where(Event.run_id == run.id, Event.kind == "status")
            )
        ]
    assert statuses == ["queued", "running", "queued", "running", "succeeded"]


def test_a_resume_never_gives_a_lost_worker_its_token_back(session: Session) -> None:
    run = new_run(session)
    first = claim(session, run.id, "w1")
    requeue_as_stale(session, run.id)
    second = claim(session, run.id, "w2")
    lease.finish(session, second, status="failed", error="boom")
    assert runs.requeue_run(session, run.id) is not None  # attempts start again at 0 ...
    third = claim(session, run.id, "w3")
    assert runs.get_run(session, run.id).attempts == 1  # type: ignore[union-attr]
    assert third.token not in (first.token, second.token)  # ... the lease does not
    with pytest.raises(LeaseLost):
        lease.beat(session, first)


def test_of_concurrent_resumes_exactly_one_wins(session: Session) -> None:
    run = new_run(session)
    runs.request_cancel(session, run.id)
    barrier = threading.Barrier(10)
    results: list[bool] = []

    def resume() -> None:
        barrier.wait()
        results.append(db.call(runs.requeue_run, run.id) is not None)

    threads = [threading.Thread(target=resume) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 9 + [True]


def test_the_sweep_takes_unsent_runs_at_once_and_sent_ones_after_the_bound(
    session: Session,
) -> None:
    sent, unsent = new_run(session), new_run(session)
    dispatch.mark_undispatched(session, unsent.id)
    now = utcnow()
    assert [r.id for r in dispatch.take_due(session, sent_before=now - timedelta(minutes=5))] == [
        unsent.id
    ]
    assert (
        dispatch.take_due(session, sent_before=now - timedelta(minutes=5)) == []
    )  # stamped as sent
    later = utcnow() + timedelta(minutes=1)
    assert {r.id for r in dispatch.take_due(session, sent_before=later)} == {sent.id, unsent.id}
    claim(session, sent.id, "w1")
    runs.request_cancel(session, unsent.id)
    assert dispatch.take_due(session, sent_before=utcnow() + timedelta(hours=1)) == []
