"""A run's summary: first (step 0), final and best eval, reward at the start and the end,
KL at the end, the share of steps' groups without signal, tokens and wall time per phase,
and the checkpoint to download. Computed from the stored steps, evaluations and checkpoints."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.deps import ReadAccess, RunDep, SessionDep
from app.api.responses import errors
from app.api.routes.checkpoints import checkpoint_out
from app.api.schemas import EvalPoint, RunSummary
from app.store import checkpoints, db, evals, steps

router = APIRouter(
    prefix="/api/runs", tags=["runs"], dependencies=[ReadAccess], responses=errors(404)
)


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def deciles(values: list[float]) -> tuple[float | None, float | None]:
    """Means of the first and the last tenth (at least one value each)."""
    n = max(1, len(values) // 10)
    return mean(values[:n]), mean(values[-n:])


def best_eval(points: list[dict[str, Any]]) -> EvalPoint | None:
    scored = [p for p in points if "eval/accuracy" in p["metrics"]]
    if not scored:
        return None
    best = max(scored, key=lambda p: (p["metrics"]["eval/accuracy"], -p["step"]))
    return EvalPoint.model_validate(best)


def phase_seconds(rows: list[dict[str, Any]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for row in rows:
        for key, value in row["metrics"].items():
            if key.startswith("time/") and key.count("/") == 1:
                totals[key.removeprefix("time/")] = (
                    totals.get(key.removeprefix("time/"), 0.0) + value
                )
    return totals


@router.get("/{run_id}/summary")
def get_summary(run: RunDep, session: SessionDep) -> RunSummary:
    """First, final and best eval, reward first and last decile, KL at the end, no-signal
    share, tokens generated, wall time per phase, and the checkpoint to download."""
    rows = db.read(steps.list_metrics, run.id)
    points = evals.list_evals(session, run.id, with_examples=False)
    found = checkpoints.list_checkpoints(session, run.id)
    chosen = next((c for c in found if c.is_final), found[-1] if found else None)
    rewards = [r["metrics"]["reward"] for r in rows if "reward" in r["metrics"]]
    first, last = deciles(rewards)
    metrics = [r["metrics"] for r in rows]
    return RunSummary(
        status=str(run.status),
        steps=sum(r["step"] > 0 for r in rows),
        first_eval=EvalPoint.model_validate(points[0]) if points else None,
        final_eval=EvalPoint.model_validate(points[-1]) if points else None,
        best_eval=best_eval(points),
        reward_first_decile=first,
        reward_last_decile=last,
        kl_end=metrics[-1].get("kl") if metrics else None,
        no_signal_share=mean(
            [m["frac_reward_zero_std"] for m in metrics if "frac_reward_zero_std" in m]
        ),
        tokens_generated=round(
            sum(m.get("tokens_per_second", 0.0) * m.get("time/step", 0.0) for m in metrics)
        ),
        seconds_per_phase=phase_seconds(rows),
        checkpoint=checkpoint_out(run.id, chosen) if chosen else None,
    )
