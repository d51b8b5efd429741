"""Held-out evaluations of a run (the spec's `eval`): scalars per evaluated step, and each
example's prompt, answer, samples and rewards for the table and an example's history."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ReadAccess, RunDep, SessionDep
from app.api.params import StepQuery
from app.api.responses import errors
from app.api.schemas import EvalList, EvalRow
from app.store import evals

router = APIRouter(
    prefix="/api/runs", tags=["evals"], dependencies=[ReadAccess], responses=errors(404)
)


@router.get("/{run_id}/evals")
def list_run_evals(
    run: RunDep, session: SessionDep, examples: bool = False, step: StepQuery | None = None
) -> EvalList:
    """Each evaluation in step order; `examples=true` adds the examples, `step` keeps one."""
    rows = evals.list_evals(session, run.id, with_examples=examples)
    if step is not None:
        rows = [r for r in rows if r["step"] == step]
    return EvalList(items=[EvalRow.model_validate(r) for r in rows])
