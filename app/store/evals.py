"""Held-out evaluations of a run: one `eval` event per evaluated step, its scalars and its
examples, so a live stream carries them like steps and a reload reads them back.

Step 0 (before training) has no step row; the scalars of later evaluations are also in
their step's metrics (the trainer merges them). Knows nothing of HTTP or torch.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.lease import Lease, hold
from app.store.models import Event
from app.store.steps import compact_scalars
from grpo.report import EvalReport


@unit
def save_eval(session: Session, run_id: str, report: EvalReport, *, lease: Lease) -> None:
    """Write the evaluation (replacing an earlier one of its step, which a resumed run
    replays); LeaseLost if the run is no longer this worker's."""
    payload = {
        "step": report.step,
        "metrics": compact_scalars(report.scalars),
        "examples": report.examples,
    }
    hold(session, lease)
    session.execute(
        delete(Event).where(Event.run_id == run_id, Event.kind == "eval", Event.step == report.step)
    )
    session.add(Event(run_id=run_id, kind="eval", step=report.step, payload=payload))


@unit
def list_evals(session: Session, run_id: str, *, with_examples: bool) -> list[dict[str, Any]]:
    """Each evaluation's payload in step order; without examples: step and metrics only."""
    stmt = (
        select(Event.payload)
        .where(Event.run_id == run_id, Event.kind == "eval")
        .order_by(Event.step)
    )
    rows = list(session.scalars(stmt))
    if with_examples:
        return rows
    return [{"step": r["step"], "metrics": r["metrics"]} for r in rows]
