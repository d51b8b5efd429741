"""Replays of a run under other rewards: ask for one, list them, read one back.

`POST /api/runs/{id}/rescore` checks the reward entries as a submit checks a spec's (the
run's spec with its `rewards` replaced, then this server's hosts, token variables and
plugins), bounds the work (steps named, completions stored in them), stores the replay
queued and sends it to the run's queue: a worker re-scores the stored completions and
recomputes their advantages with the run's own knobs (worker/rescore.py). The run itself
is never written. Asking is a write to the run (its owner or an admin); reading follows the
read rule.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from app.api.checks.rewards import check_rewards
from app.api.deps import (
    ReadAccess,
    RunDep,
    SessionDep,
    SettingsDep,
    WriteAccess,
    WriterDep,
    check_owner,
)
from app.api.errors import ApiError
from app.api.params import MAX_INT, MAX_STEP
from app.api.responses import WRITES, errors
from app.queue import dispatch_rescore
from app.store import rescores
from app.store.models import Rescore, RescoreGroup
from grpo.spec import JobSpec
from grpo.spec.rewards import RewardSpec

MAX_RESCORE_STEPS = 1000
"""Steps one replay may name."""
MAX_RESCORE_COMPLETIONS = 20_000
"""Stored completions one replay may re-score (the chosen steps' kept groups x G)."""

router = APIRouter(prefix="/api/runs", tags=["rescores"], responses=errors(404))


class RescoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rewards: tuple[RewardSpec, ...] = Field(min_length=1, max_length=64)
    """The reward entries to score with, as a JobSpec's `rewards`."""
    steps: list[Annotated[int, Field(ge=1, le=MAX_STEP)]] | None = Field(
        None, min_length=1, max_length=MAX_RESCORE_STEPS
    )
    """Steps whose stored completions are re-scored; null: every step that has some."""


class RescoreOut(BaseModel):
    id: int
    run_id: str
    status: str
    """queued, running, succeeded or failed."""
    rewards: list[dict[str, Any]]
    steps: list[int]
    submitted_by: str | None
    summary: dict[str, Any] | None
    """Once succeeded: groups, completions, flipped_groups, flipped_completions, the
    distributions (mean, std, min, max, edges, counts) of reward_before, reward,
    advantage_before and advantage, and notes on how far the advantages compare."""
    error: str | None
    created_at: datetime
    finished_at: datetime | None


class RescoreGroupOut(BaseModel):
    step: int
    group_index: int
    prompt_id: str
    completions: list[dict[str, Any]]
    """Per completion: rewards (by label), reward, advantage, reward_before, advantage_before."""
    flips: list[dict[str, Any]]
    """Completions whose advantage changed sign: completion, advantage_before, advantage,
    change."""


class RescoreDetail(RescoreOut):
    groups: list[RescoreGroupOut]


class RescoreList(BaseModel):
    items: list[RescoreOut]


def rescore_out(rescore: Rescore) -> RescoreOut:
    return RescoreOut.model_validate(rescore, from_attributes=True)


def group_out(group: RescoreGroup) -> RescoreGroupOut:
    return RescoreGroupOut.model_validate(group, from_attributes=True)


@router.post(
    "/{run_id}/rescore",
    status_code=202,
    responses=errors(409, 422, *WRITES),
    dependencies=[WriteAccess],  # a 401 before the run is looked up, as every write
)
def create_rescore(
    run: RunDep,
    body: RescoreRequest,
    caller: WriterDep,
    session: SessionDep,
    settings: SettingsDep,
) -> RescoreOut:
    """Re-score the run's stored completions under `rewards` on a worker, without training;
    read the replay back with GET .../rescores/{rescore_id}."""
    check_owner(caller, run, "replay it")
    entries = [entry.model_dump() for entry in body.rewards]
    spec = JobSpec.model_validate({**run.spec, "rewards": entries})  # a 422 naming the field
    check_rewards(spec, settings)
    if spec.tools:
        why = f"run {run.id} uses tools: replaying tool trajectories is not supported"
        raise ApiError(409, "conflict", why)
    steps = chosen_steps(rescores.stored_sample_steps(session, run.id), body.steps, spec)
    rescore = rescores.create_rescore(
        session, run.id, rewards=entries, steps=steps, submitted_by=caller.name
    )
    dispatch_rescore(session, rescore.id, queue=run.queue)  # unsent: the sweep sends it
    return rescore_out(rescore)


def chosen_steps(stored: dict[int, int], asked: list[int] | None, spec: JobSpec) -> list[int]:
    """The steps to replay (stored ones), refused with a 409/422 naming what is wrong."""
    if not stored:
        raise ApiError(409, "conflict", "the run has no stored completions to re-score")
    steps = sorted(set(asked)) if asked is not None else sorted(stored)
    missing = [s for s in steps if s not in stored]
    if missing:
        shown = ", ".join(map(str, missing[:10]))
        fields = [{"loc": "steps", "message": f"no stored completions at step(s) {shown}"}]
        raise ApiError(422, "validation_error", f"steps: no stored completions at {shown}", fields)
    count = sum(stored[s] for s in steps) * spec.num_generations
    if count > MAX_RESCORE_COMPLETIONS:
        why = (
            f"the chosen steps hold {count} stored completions, more than the "
            f"{MAX_RESCORE_COMPLETIONS} one replay may re-score: name fewer steps"
        )
        raise ApiError(422, "validation_error", f"steps: {why}", [{"loc": "steps", "message": why}])
    return steps


@router.get("/{run_id}/rescores", dependencies=[ReadAccess])
def list_rescores(run: RunDep, session: SessionDep) -> RescoreList:
    """The run's replays, oldest first, without their groups."""
    return RescoreList(items=[rescore_out(r) for r in rescores.list_rescores(session, run.id)])


@router.get("/{run_id}/rescores/{rescore_id}", dependencies=[ReadAccess])
def read_rescore(
    run: RunDep,
    rescore_id: Annotated[int, Path(ge=1, le=MAX_INT)],
    session: SessionDep,
    step: Annotated[int | None, Query(ge=1, le=MAX_STEP)] = None,
) -> RescoreDetail:
    """One replay with its groups (`step`: only that step's)."""
    rescore = rescores.get_rescore(session, run.id, rescore_id)
    if rescore is None:
        raise ApiError(404, "not_found", f"run {run.id} has no replay {rescore_id}")
    groups = rescores.rescore_groups(session, rescore.id, step=step)
    return RescoreDetail(**rescore_out(rescore).model_dump(), groups=[group_out(g) for g in groups])
