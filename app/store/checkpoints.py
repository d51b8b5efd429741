"""A run's checkpoints on disk, as the worker that wrote them recorded them.

The trainer writes and prunes the files (grpo/checkpoints/files.py); this module keeps one row per
checkpoint still there, written only under the run's lease. Knows nothing of HTTP or torch.
"""

from __future__ import annotations

from sqlalchemy import delete, insert, or_, select
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.lease import Lease, hold
from app.store.models import Checkpoint
from grpo.report import SavedCheckpoint


@unit
def record_checkpoint(session: Session, lease: Lease, saved: SavedCheckpoint) -> None:
    """The checkpoint just renamed into place replaces any row of its step, and the rows of
    the checkpoints its pruning removed go; LeaseLost if the run is no longer this worker's."""
    run_id = lease.run_id
    hold(session, lease)
    gone = or_(Checkpoint.step == saved.step, Checkpoint.step.not_in(saved.kept_steps))
    session.execute(delete(Checkpoint).where(Checkpoint.run_id == run_id, gone))
    session.execute(
        insert(Checkpoint).values(
            run_id=run_id,
            step=saved.step,
            path=saved.path,
            num_bytes=saved.num_bytes,
            is_final=saved.is_final,
        )
    )


@unit
def list_checkpoints(session: Session, run_id: str) -> list[Checkpoint]:
    """The run's checkpoints on disk, oldest step first."""
    stmt = select(Checkpoint).where(Checkpoint.run_id == run_id).order_by(Checkpoint.step)
    return list(session.scalars(stmt))
