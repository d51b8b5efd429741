"""The checkpoint table holds what is on disk: the owner records each checkpoint it renames
into place, pruned ones leave, and a worker that lost its run records nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from app.store import checkpoints, runs
from app.store.lease import Lease, LeaseLost
from app.store.models import utcnow
from grpo.report import SavedCheckpoint
from grpo.spec import JobSpec
from tests.store_fixture import session, store

__all__ = ["session", "store"]


def claimed_run(session: Session) -> Lease:
    run, _ = runs.create_run(
        session, JobSpec(model="builtin:tiny", max_steps=8), package_version="t"
    )
    claimed = runs.claim_run(session, run.id, worker="w1", device="cpu")
    assert claimed is not None
    return Lease.of(claimed)


def saved(step: int, kept: tuple[int, ...], *, is_final: bool = False) -> SavedCheckpoint:
    path = f"/runs/x/checkpoints/step-{step:06d}"
    return SavedCheckpoint(step, path, 1000 + step, is_final, kept)


def rows(session: Session, run_id: str) -> list[tuple[int, int, bool]]:
    return [
        (c.step, c.num_bytes, c.is_final) for c in checkpoints.list_checkpoints(session, run_id)
    ]


def test_rows_follow_the_checkpoints_kept_on_disk(session: Session) -> None:
    held = claimed_run(session)
    for step, kept in [(2, (2,)), (4, (2, 4)), (6, (2, 4, 6)), (8, (4, 6, 8))]:
        checkpoints.record_checkpoint(session, held, saved(step, kept, is_final=step == 8))
    assert rows(session, held.run_id) == [(4, 1004, False), (6, 1006, False), (8, 1008, True)]

    checkpoints.record_checkpoint(
        session, held, saved(8, (4, 6, 8), is_final=True)
    )  # written again
    assert rows(session, held.run_id) == [(4, 1004, False), (6, 1006, False), (8, 1008, True)]


def test_a_worker_that_lost_its_run_records_no_checkpoint(session: Session) -> None:
    stale = claimed_run(session)
    requeued, _ = runs.requeue_stale_runs(
        session, stale_before=utcnow() + timedelta(hours=1), max_retries=9
    )
    assert [r.id for r in requeued] == [stale.run_id]
    with pytest.raises(LeaseLost):
        checkpoints.record_checkpoint(session, stale, saved(2, (2,)))
    assert rows(session, stale.run_id) == []
