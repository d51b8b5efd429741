"""Actions on a run: cancel, resume, clone, delete.

Cancel, resume and delete are for the run's owner or an admin; a clone is the cloner's run."""

from __future__ import annotations

import shutil
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict

from app.api.checks.problems import spec_problems
from app.api.checks.refusal import refuse
from app.api.deps import RunDep, SessionDep, SettingsDep, WriteAccess, WriterDep, check_owner
from app.api.errors import ApiError
from app.api.responses import WRITES, errors
from app.api.routes.runs import PACKAGE_VERSION, run_out
from app.api.schemas import RunOut
from app.queue import dispatch_run
from app.store import checkpoints, runs
from grpo.spec import JobSpec

router = APIRouter(
    prefix="/api/runs",
    tags=["runs"],
    dependencies=[WriteAccess],
    responses=errors(404, 409, *WRITES),
)


class ResumedRun(RunOut):
    """The run back in the queue, and where its next attempt starts."""

    resumes_from_step: int
    """The step of the latest checkpoint, which the next attempt loads and trains on from;
    0 when the run saved none: it restarts from step 0."""


class ClonePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    patch: dict[str, Any] = {}
    """Fields of the spec to change (nested objects merge)."""


@router.post("/{run_id}/cancel")
def cancel_run(run: RunDep, caller: WriterDep, session: SessionDep) -> RunOut:
    """Queued runs never start; running runs stop at the next step boundary with a checkpoint."""
    check_owner(caller, run, "cancel it")
    updated = runs.request_cancel(session, run.id)
    assert updated is not None
    return run_out(updated)


@router.post("/{run_id}/resume")
def resume_run(run: RunDep, caller: WriterDep, session: SessionDep) -> ResumedRun:
    """A cancelled or failed run continues from its last checkpoint, or restarts from step
    0 when it saved none (`resumes_from_step` says which)."""
    check_owner(caller, run, "resume it")
    saved = checkpoints.list_checkpoints(session, run.id)  # read while no worker holds it
    updated = runs.requeue_run(session, run.id)
    if updated is None:  # re-read: a concurrent resume may have just moved it
        status = runs.get_status(session, run.id) or "deleted"
        raise ApiError(
            409, "conflict", f"run {run.id} is {status}; only cancelled or failed runs resume"
        )
    dispatch_run(session, updated.id, queue=updated.queue)
    step = saved[-1].step if saved else 0
    return ResumedRun(**run_out(updated).model_dump(), resumes_from_step=step)


def merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@router.post("/{run_id}/clone", status_code=201)
def clone_run(
    run: RunDep,
    caller: WriterDep,
    response: Response,
    settings: SettingsDep,
    session: SessionDep,
    body: ClonePatch | None = None,
) -> RunOut:
    """A new run with the same spec, optionally patched; the patched spec is validated again
    (a 422 listing every problem, as at submit). A clone of a run placed on a generation
    worker is placed so too, unless the patch gives a server address (app/store/runs.py's
    stored_spec)."""
    patch = body.patch if body else {}
    spec_data = merge(run.spec, patch)  # a run placed on a generation worker kept no address
    if body is None or "name" not in body.patch:
        spec_data["name"] = f"{run.name} (clone)"[:200]
    refuse(spec_problems(spec_data, settings, session))
    spec = JobSpec.model_validate(spec_data)
    clone, _ = runs.create_run(
        session, spec, package_version=PACKAGE_VERSION, submitted_by=caller.name
    )
    dispatch_run(session, clone.id, queue=clone.queue)
    response.headers["Location"] = f"/api/runs/{clone.id}"
    return run_out(clone)


@router.delete("/{run_id}", status_code=204)
def delete_run(
    run: RunDep, caller: WriterDep, settings: SettingsDep, session: SessionDep
) -> Response:
    """Only finished runs; removes their rows and their files (checkpoints)."""
    check_owner(caller, run, "delete it")
    if not runs.delete_run(session, run.id):
        raise ApiError(409, "conflict", f"run {run.id} is {run.status}; cancel it before deleting")
    shutil.rmtree(settings.runs_dir / run.id, ignore_errors=True)
    return Response(status_code=204)
