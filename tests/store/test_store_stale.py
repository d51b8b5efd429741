"""Runs of dead workers: requeued while retries remain, then failed with the reason."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from app.store import runs
from app.store.models import RunStatus, utcnow
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
