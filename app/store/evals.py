"""Held-out evaluations of a run: one `eval` event per evaluated step, its scalars and its
examples, so a live stream carries them like steps and a reload reads them back.

The scalars of an evaluation after a step are also in that step's metrics (the trainer
merges them); step 0's (before training) are the metrics row of step 0, which holds nothing
else: no groups, no histograms, no step event, and a run's step count stays the steps it
trained. So /metrics, the CSV export and every curve start at the untrained model.
Knows nothing of HTTP or torch.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.lease import Lease, hold
from app.store.models import Event, StepMetric
from app.store.steps import compact_scalars, forget_doctor
from grpo.report import EvalReport


@unit
def save_eval(session: Session, run_id: str, report: EvalReport, *, lease: Lease) -> None:
    """Write the evaluation (replacing an earlier one of its step, which a resumed run
    replays); LeaseLost if the run is no longer this worker's."""
    metrics = compact_scalars(report.scalars)
    payload = {"step": report.step, "metrics": metrics, "examples": report.examples}
    hold(session, lease)
    session.execute(
        delete(Event).where(Event.run_id == run_id, Event.kind == "eval", Event.step == report.step)
    )
    session.add(Event(run_id=run_id, kind="eval", step=report.step, payload=payload))
    if report.step == 0:
        _save_step_zero(session, run_id, metrics)


def _save_step_zero(session: Session, run_id: str, metrics: dict[str, float]) -> None:
    """Step 0's metrics row: the evaluation alone (a run restarted from scratch replaces it)."""
    session.execute(delete(StepMetric).where(StepMetric.run_id == run_id, StepMetric.step == 0))
    forget_doctor(session, run_id)
    session.add(
        StepMetric(
            run_id=run_id,
            step=0,
            metrics=metrics,
            advantage_histogram=[],
            reward_histogram=[],
            group_reward_std_histogram=[],
        )
    )


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
