"""Runs of dead workers: requeued while retries remain, then failed with the reason; a
requeue and a hand-back say where the run starts again."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store import checkpoints, lease, runs
from app.store.lease import Lease
from app.store.models import LogLine, RunStatus, utcnow
from grpo.report import SavedCheckpoint
from grpo.spec import JobSpec
from tests.store_fixture import session, store

__all__ = ["session", "store"]


def test_stale_runs_are_requeued_up_to_the_retry_limit_then_failed(session: Session) -> None:
    run, _ = runs.create_run(session, JobSpec(model="builtin:tiny"), package_version="t")
    stale = utcnow() + timedelta(hours=1)  # every heartbeat so far is older than this
    for attempt in (1, 2):
        claimed = runs.claim_run(session, run.id, worker=f"w{attempt}", device="cpu")
        assert claimed is not None and claimed.attempts == attempt
        beating = utcnow() - timedelta(hours=1)
        fresh, _ = runs.requeue_stale_runs(session, stale_before=beating, max_retries=1)
        assert fresh == []  # a beating run is left alone
        requeued, failed = runs.requeue_stale_runs(session, stale_before=stale, max_retries=1)
        if attempt == 1:
            assert [r.id for r in requeued] == [run.id] and failed == []
            assert runs.get_run(session, run.id).status == RunStatus.QUEUED
        else:
            assert requeued == [] and [r.id for r in failed] == [run.id]
    final = runs.get_run(session, run.id)
    assert final is not None and final.status == RunStatus.FAILED
    assert final.error and "w2 stopped responding" in final.error, final.error
    assert "gave up after 1 retries" in final.error


def test_a_requeue_and_a_hand_back_say_whether_the_run_resumes_or_starts_again(
    session: Session,
) -> None:
    run, _ = runs.create_run(session, JobSpec(model="builtin:tiny"), package_version="t")
    stale = utcnow() + timedelta(hours=1)
    runs.claim_run(session, run.id, worker="w1", device="cpu")
    runs.requeue_stale_runs(session, stale_before=stale, max_retries=3)
    error = runs.get_run(session, run.id).error
    assert error == (
        "worker w1 stopped responding; requeued: it starts again from step 0: it saved no "
        "checkpoint"
    )

    claimed = runs.claim_run(session, run.id, worker="w2", device="cpu")
    held = Lease(run.id, claimed.lease)
    for step in (2, 4):
        saved = SavedCheckpoint(step, f"/ckpt/{step}", 1, is_final=False, kept_steps=(2, 4))
        checkpoints.record_checkpoint(session, held, saved)
    lease.hand_back(session, held, reason="worker w2 gave the run back", say_where=True)
    logs = session.scalars(select(LogLine.message).where(LogLine.run_id == run.id)).all()
    assert "worker w2 gave the run back; it resumes from step 4 (its last checkpoint)" in logs

    runs.claim_run(session, run.id, worker="w3", device="cpu")
    runs.requeue_stale_runs(session, stale_before=stale, max_retries=3)
    error = runs.get_run(session, run.id).error
    assert (
        error
        == "worker w3 stopped responding; requeued: it resumes from step 4 (its last checkpoint)"
    )
