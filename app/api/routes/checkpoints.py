"""A run's checkpoints: the list, and each one's model as a `.tar.gz` download.

Weights are the valuable part: reading them needs a token whenever tokens are configured,
even where other reads are open, and downloading them is for the run's owner or an admin.
The archive is a cached file served with `Content-Length` and `Range` (a cut download
resumes). Only files inside the run's directory are served.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path as PathType
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from app.api.checkpoint_archive import (
    CheckpointGone,
    MergeFailed,
    archive_name,
    cached_archive,
    cached_merged_archive,
    is_lora_checkpoint,
    prune_archives,
)
from app.api.deps import (
    RunDep,
    SessionDep,
    SettingsDep,
    WeightsAccess,
    WeightsReaderDep,
    check_owner,
)
from app.api.errors import ApiError
from app.api.responses import ErrorOut, errors
from app.api.schemas import CheckpointList, CheckpointOut
from app.settings import Settings
from app.store import checkpoints
from app.store.models import Checkpoint

router = APIRouter(prefix="/api/runs", tags=["checkpoints"], responses=errors(404))
STEP_OR_LATEST = r"^(latest|\d{1,10})$"


def checkpoint_out(run_id: str, checkpoint: Checkpoint) -> CheckpointOut:
    return CheckpointOut(
        step=checkpoint.step,
        created_at=checkpoint.created_at,
        num_bytes=checkpoint.num_bytes,
        is_final=checkpoint.is_final,
        download_url=f"/api/runs/{run_id}/checkpoints/{checkpoint.step}/download",
    )


@router.get("/{run_id}/checkpoints", dependencies=[WeightsAccess])
def list_run_checkpoints(run: RunDep, session: SessionDep) -> CheckpointList:
    """The run's checkpoints on disk, oldest step first; the final one says so."""
    return CheckpointList(
        items=[checkpoint_out(run.id, c) for c in checkpoints.list_checkpoints(session, run.id)]
    )


def pick_checkpoint(found: list[Checkpoint], which: str) -> Checkpoint:
    if not found:
        raise ApiError(404, "not_found", "the run has no checkpoint yet")
    if which == "latest":
        return found[-1]
    for checkpoint in found:
        if checkpoint.step == int(which):
            return checkpoint
    steps = ", ".join(str(c.step) for c in found)
    raise ApiError(404, "not_found", f"no checkpoint at step {which} (there are: {steps})")


@router.get(
    "/{run_id}/checkpoints/{which}/download",
    response_class=FileResponse,
    responses={
        200: {
            "description": "The checkpoint's save_pretrained directory as .tar.gz",
            "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
        },
        206: {"description": "The requested byte range of the archive"},
        409: {"model": ErrorOut, "description": "merge=true: the adapter could not be merged"},
        416: {"description": "The Range lies outside the archive"},
    },
)
async def download_checkpoint(
    caller: WeightsReaderDep,  # first: no token learns nothing, not even if the run exists
    run: RunDep,
    settings: SettingsDep,
    session: SessionDep,
    which: Annotated[str, Path(pattern=STEP_OR_LATEST, description="a step, or `latest`")],
    merge: bool = False,
) -> FileResponse:
    """The model of a checkpoint (full weights, or the LoRA adapter) with its tokenizer;
    `merge=true` turns a LoRA adapter into merged full weights (a full model is unchanged).
    For the run's owner or an admin."""
    check_owner(caller, run, "download its weights")
    found = await run_in_threadpool(checkpoints.list_checkpoints, session, run.id)
    checkpoint = pick_checkpoint(found, which)
    run_dir = settings.runs_dir / run.id
    try:
        is_merged = merge and await run_in_threadpool(is_lora_checkpoint, checkpoint, run_dir)
        build = partial(_merged, settings) if is_merged else cached_archive
        archive = await run_in_threadpool(build, run.id, checkpoint, run_dir)
    except CheckpointGone as exc:
        raise ApiError(404, "not_found", str(exc)) from exc
    except MergeFailed as exc:
        raise ApiError(409, "merge_failed", f"the adapter could not be merged: {exc}") from exc
    await run_in_threadpool(prune_archives, run_dir, found)
    name = archive_name(run.id, checkpoint, is_merged=is_merged)
    return FileResponse(archive, media_type="application/gzip", filename=name)


def _merged(settings: Settings, run_id: str, checkpoint: Checkpoint, run_dir: PathType) -> PathType:
    """Merged as the worker loaded the base model: same cache, same model roots."""
    roots = [arg for root in settings.model_root_list for arg in ("--model-root", str(root))]
    merge_args = [
        "--cache-dir", str(settings.resolved_cache_dir),
        "--base", str(settings.local_path_base), *roots,
    ]  # fmt: skip
    return cached_merged_archive(run_id, checkpoint, run_dir, merge_args=merge_args)
