"""Replays of a run under other rewards: the request, its state, and each replayed group.

The API creates a replay (queued) for steps whose completions are stored; a worker claims
it, reads the stored groups step by step, writes each replayed step's groups, and finishes
it with a summary or an error (grpo/eval/replay.py computes; worker/rescore.py glues). Nothing
here writes a run's own rows. Knows nothing of HTTP or torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from app.store.bulk import bulk_insert
from app.store.db import unit
from app.store.models import Rescore, RescoreGroup, Run, Sample, StepGroup, utcnow


@unit
def stored_sample_steps(session: Session, run_id: str) -> dict[int, int]:
    """Step -> groups whose completions are stored, for every step that has some."""
    stmt = (
        select(Sample.step, func.count())
        .where(Sample.run_id == run_id)
        .group_by(Sample.step)
        .order_by(Sample.step)
    )
    return {step: count for step, count in session.execute(stmt)}


@unit
def create_rescore(
    session: Session,
    run_id: str,
    *,
    rewards: list[dict[str, Any]],
    steps: Sequence[int],
    submitted_by: str | None,
) -> Rescore:
    rescore = Rescore(
        run_id=run_id,
        status="queued",
        dispatched_at=utcnow(),
        rewards=rewards,
        steps=sorted(steps),
        submitted_by=submitted_by,
    )
    session.add(rescore)
    session.flush()
    return rescore


@unit
def mark_rescore_undispatched(session: Session, rescore_id: int) -> None:
    """The send after the commit failed: the next sweep sends it (app/queue.py)."""
    session.execute(
        update(Rescore)
        .where(Rescore.id == rescore_id, Rescore.status == "queued")
        .values(dispatched_at=None)
    )


@unit
def take_due_rescores(
    session: Session, *, sent_before: datetime, limit: int = 100
) -> list[tuple[int, str]]:
    """(id, the run's queue) of queued replays never sent, or last sent before `sent_before`
    and still unclaimed; each is stamped as sent now (as dispatch.take_due does runs)."""
    due = session.execute(
        select(Rescore.id, Run.queue)
        .join(Run, Run.id == Rescore.run_id)
        .where(
            Rescore.status == "queued",
            or_(Rescore.dispatched_at.is_(None), Rescore.dispatched_at < sent_before),
        )
        .order_by(Rescore.id)
        .limit(limit)
    ).all()
    ids = [rescore_id for rescore_id, _ in due]
    if ids:
        session.execute(update(Rescore).where(Rescore.id.in_(ids)).values(dispatched_at=utcnow()))
    return [(rescore_id, queue) for rescore_id, queue in due]


@unit
def claim_rescore(session: Session, rescore_id: int) -> Rescore | None:
    """queued -> running; None when it is not queued (a duplicate delivery)."""
    result = session.execute(
        update(Rescore)
        .where(Rescore.id == rescore_id, Rescore.status == "queued")
        .values(status="running")
    )
    if getattr(result, "rowcount", 0) != 1:
        return None
    return session.get(Rescore, rescore_id)


@unit
def stored_groups(session: Session, run_id: str, step: int) -> list[dict[str, Any]]:
    """The step's groups that kept their completions, in index order: {index, prompt_id,
    prompt, answer, completions}."""
    stmt = (
        select(
            StepGroup.index,
            StepGroup.prompt_id,
            StepGroup.prompt,
            StepGroup.answer,
            Sample.completions,
        )
        .join(
            Sample,
            (Sample.run_id == StepGroup.run_id)
            & (Sample.step == StepGroup.step)
            & (Sample.group_index == StepGroup.index),
        )
        .where(StepGroup.run_id == run_id, StepGroup.step == step)
        .order_by(StepGroup.index)
    )
    return [dict(row._mapping) for row in session.execute(stmt)]


@unit
def save_rescore_groups(session: Session, rescore_id: int, groups: list[dict[str, Any]]) -> None:
    """One replayed step's groups: {step, group_index, prompt_id, completions, flips}."""
    bulk_insert(session, RescoreGroup, [{"rescore_id": rescore_id, **g} for g in groups])


@unit
def finish_rescore(
    session: Session,
    rescore_id: int,
    *,
    summary: dict[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """succeeded with its summary, or failed with the error."""
    session.execute(
        update(Rescore)
        .where(Rescore.id == rescore_id)
        .values(
            status="failed" if error is not None else "succeeded",
            summary=summary,
            error=error,
            finished_at=utcnow(),
        )
    )


@unit
def list_rescores(session: Session, run_id: str) -> list[Rescore]:
    stmt = select(Rescore).where(Rescore.run_id == run_id).order_by(Rescore.id)
    return list(session.scalars(stmt))


@unit
def get_rescore(session: Session, run_id: str, rescore_id: int) -> Rescore | None:
    rescore = session.get(Rescore, rescore_id)
    return rescore if rescore is not None and rescore.run_id == run_id else None


@unit
def rescore_groups(
    session: Session, rescore_id: int, *, step: int | None = None
) -> list[RescoreGroup]:
    stmt = select(RescoreGroup).where(RescoreGroup.rescore_id == rescore_id)
    if step is not None:
        stmt = stmt.where(RescoreGroup.step == step)
    return list(session.scalars(stmt.order_by(RescoreGroup.step, RescoreGroup.group_index)))
