"""Generation servers of runs (issue 41 item 2): a `vllm_mode: server` run submitted with no
server address (`needs_generation`) is trained by a training worker on the vLLM server a
generation worker (`grpo worker --generation`) starts for it.

Each claim of the run (its lease) gets a server of its own: a generation worker takes the
claim (`take_run`: a running run whose claim no generation worker holds), starts a server,
publishes its URL for that claim (`publish_url`), and stops it once the claim is over (the
run ended, was handed back or claimed again: `is_serving` is false). The training worker
reads the URL of its own claim (`url_for`). Every write is conditional on the claim, so a
generation worker that lost the run never touches the next claim's server. Knows nothing of
processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.models import Run, RunStatus, WorkerState

GENERATION_ROLE = "generation"
TRAINING_ROLE = "training"


@dataclass(frozen=True)
class GenerationClaim:
    """One claim of a run that a generation worker serves."""

    run_id: str
    lease: int
    spec: dict[str, Any]


def _claimed_by(worker: str, claim: GenerationClaim) -> Any:
    return (
        (Run.id == claim.run_id)
        & (Run.status == RunStatus.RUNNING)
        & (Run.lease == claim.lease)
        & (Run.generation_worker == worker)
        & (Run.generation_lease == claim.lease)
    )


@unit
def take_run(session: Session, worker: str) -> GenerationClaim | None:
    """The oldest running run that needs a generation server for its current claim and has
    none, now `worker`'s to serve; None when there is none."""
    run = session.scalars(
        select(Run)
        .where(
            Run.status == RunStatus.RUNNING,
            Run.needs_generation.is_(True),
            or_(Run.generation_lease.is_(None), Run.generation_lease != Run.lease),
        )
        .order_by(Run.started_at)
        .limit(1)
        .with_for_update(skip_locked=True)
    ).first()
    if run is None:
        return None
    run.generation_worker, run.generation_lease, run.generation_url = worker, run.lease, None
    return GenerationClaim(run.id, run.lease, dict(run.spec))


@unit
def publish_url(session: Session, worker: str, claim: GenerationClaim, url: str) -> bool:
    """Publish the server's URL for the claim; False when the claim is over."""
    result = session.execute(
        update(Run).where(_claimed_by(worker, claim)).values(generation_url=url)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


@unit
def is_serving(session: Session, worker: str, claim: GenerationClaim) -> bool:
    """Whether the claim is still running and still `worker`'s to serve."""
    return session.scalar(select(Run.id).where(_claimed_by(worker, claim))) is not None


@unit
def release(session: Session, worker: str, claim: GenerationClaim) -> None:
    """The server is gone: its URL is no longer published (the claim stays taken: the next
    claim of the run gets a server again)."""
    session.execute(
        update(Run)
        .where(Run.id == claim.run_id, Run.generation_worker == worker)
        .where(Run.generation_lease == claim.lease)
        .values(generation_url=None)
    )


@unit
def url_for(session: Session, run_id: str, lease: int) -> str | None:
    """The URL of the server started for the run's claim `lease`, once it answers."""
    return session.scalar(
        select(Run.generation_url).where(Run.id == run_id, Run.generation_lease == lease)
    )


@unit
def has_free_generation_worker(session: Session, *, seen_after: datetime) -> bool:
    """Whether a generation worker heard from since `seen_after` serves no run now (its
    `run_id` is the run it serves)."""
    found = session.scalar(
        select(WorkerState.name)
        .where(
            WorkerState.role == GENERATION_ROLE,
            WorkerState.last_seen_at >= seen_after,
            WorkerState.run_id.is_(None),
        )
        .limit(1)
    )
    return found is not None
