"""A step's groups, one group with its completions, and one prompt across steps."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import ReadAccess, RunDep, SessionDep
from app.api.errors import ApiError
from app.api.params import PromptIdPath, StepPath
from app.api.responses import errors
from app.api.schemas import CompletionOut, GroupDetail, GroupList, GroupSummary
from app.store import steps
from app.store.models import StepGroup
from app.store.steps import GroupFilter

router = APIRouter(
    prefix="/api/runs", tags=["steps"], dependencies=[ReadAccess], responses=errors(404)
)


def group_summary(group: StepGroup) -> GroupSummary:
    return GroupSummary.model_validate(group, from_attributes=True)


@router.get("/{run_id}/steps/{step}/groups")
def list_groups(
    run: RunDep,
    session: SessionDep,
    step: StepPath,
    filter: Annotated[GroupFilter | None, Query()] = None,
) -> GroupList:
    """Every group the step trained on with its reward stats; `filter` keeps one kind, and
    `dropped` shows the groups dynamic sampling left out instead."""
    return GroupList(
        items=[group_summary(g) for g in steps.list_groups(session, run.id, step, only=filter)]
    )


@router.get("/{run_id}/steps/{step}/groups/{index}")
def get_group(run: RunDep, session: SessionDep, step: StepPath, index: StepPath) -> GroupDetail:
    """The prompt, its reference answer and all G completions, best reward first."""
    found = steps.get_group(session, run.id, step, index)
    if found is None:
        raise ApiError(404, "not_found", f"run {run.id} has no group {index} at step {step}")
    group, stored = found
    completions = [CompletionOut.model_validate(c) for c in stored]
    completions.sort(key=lambda c: -c.reward)
    return GroupDetail(**group_summary(group).model_dump(), completions=completions)


@router.get("/{run_id}/prompts/{prompt_id:path}")
def prompt_history(run: RunDep, session: SessionDep, prompt_id: PromptIdPath) -> GroupList:
    """One prompt's groups across steps: did training help it?"""
    return GroupList(
        items=[group_summary(g) for g in steps.prompt_history(session, run.id, prompt_id)]
    )
