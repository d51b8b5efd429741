"""Runs: submit, list, read, and the step metrics and histograms behind the charts.

The per-step bodies and the logs are cached by the run's newest event id (body_cache.py):
one small query answers a reload of a run that has not moved since.
"""

from __future__ import annotations

import base64
from datetime import datetime
from functools import partial
from importlib.metadata import version
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response

from app.api.body_cache import bodies
from app.api.checks.problems import server_problems
from app.api.checks.refusal import refuse
from app.api.deps import (
    ReadAccess,
    RunDep,
    RunVersionDep,
    SessionDep,
    SettingsDep,
    WriteAccess,
    WriterDep,
)
from app.api.errors import ApiError
from app.api.params import (
    MAX_STEP,
    AfterStepQuery,
    MetricKeysQuery,
    RunIdPath,
    SearchQuery,
    StepQuery,
)
from app.api.responses import WRITES, errors
from app.api.schemas import (
    DoctorMark,
    HistogramList,
    LogList,
    LogRow,
    MetricList,
    MetricRow,
    RunList,
    RunOut,
)
from app.api.spec_route import SpecBodyRoute
from app.queue import dispatch_run
from app.store import db, events, findings, histograms, runs, steps, thinning
from app.store.db import Connection
from app.store.models import Run, RunStatus
from grpo.spec import JobSpec

router = APIRouter(prefix="/api/runs", tags=["runs"], responses=errors(404))
PACKAGE_VERSION = version("grpo-service")
REPLAYED = "A retry: the run this Idempotency-Key created, unchanged"


def run_out(run: Run, mark: tuple[int, str] | None = None) -> RunOut:
    """The run as served; `mark`: its open findings (findings.open_marks)."""
    doctor = DoctorMark.model_validate({"open": mark[0], "severity": mark[1]}) if mark else None
    return RunOut.model_validate({**runs.run_summary(run), "doctor": doctor})


def submit_run(
    spec: JobSpec,
    caller: WriterDep,
    response: Response,
    settings: SettingsDep,
    session: SessionDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> RunOut:
    """Store the run, then enqueue it; a repeated Idempotency-Key returns the first run
    (the same spec again: 200; a different one: 422 naming the key). A refused spec is one
    422 listing every problem, the JobSpec's rules' and this server's."""
    refuse(server_problems(spec, settings, session))
    run, is_new = runs.create_run(
        session,
        spec,
        package_version=PACKAGE_VERSION,
        idempotency_key=idempotency_key,
        submitted_by=caller.name,
    )
    if is_new:
        dispatch_run(session, run.id, queue=run.queue)
    else:
        _check_same_spec(run, spec, idempotency_key or "")
        response.status_code = 200
    response.headers["Location"] = f"/api/runs/{run.id}"
    return run_out(run)


router.add_api_route(
    "",
    submit_run,
    methods=["POST"],
    status_code=201,
    dependencies=[WriteAccess],
    responses=errors(*WRITES) | {200: {"model": RunOut, "description": REPLAYED}},
    route_class_override=SpecBodyRoute,  # a refused body: every problem at once
)


def _check_same_spec(run: Run, spec: JobSpec, key: str) -> None:
    """A key names one request: reusing it for another spec is a client bug, not a retry."""
    new = spec.model_dump(mode="json")
    if run.spec == new:
        return
    try:  # the stored spec may predate fields added since, with their defaults
        if JobSpec.model_validate(run.spec).model_dump(mode="json") == new:
            return
    except ValueError:
        pass
    message = (
        f"Idempotency-Key {key!r} was already used for run {run.id} with a different spec; "
        "use a new key for a new run"
    )
    fields = [{"loc": "header.idempotency-key", "message": message}]
    raise ApiError(422, "idempotency_key_reused", message, fields)


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, run_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("|", 1)
        if "\x00" in run_id:
            raise ValueError("NUL in cursor")
        return datetime.fromisoformat(created), run_id
    except ValueError as exc:
        raise ApiError(400, "bad_cursor", "cursor is not one this API returned") from exc


def _encode_cursor(run: Run) -> str:
    return base64.urlsafe_b64encode(f"{run.created_at.isoformat()}|{run.id}".encode()).decode()


@router.get("", dependencies=[ReadAccess], responses=errors(400))
def list_runs(
    session: SessionDep,
    status: RunStatus | None = None,
    q: SearchQuery = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: str | None = None,
) -> RunList:
    """Newest first, filtered by status and name; follow next_cursor for the next page."""
    page = runs.list_runs(
        session,
        status=status,
        query=q,
        limit=limit,
        cursor=_decode_cursor(cursor) if cursor else None,
    )
    next_cursor = _encode_cursor(page[-1]) if len(page) == limit else None
    marks = findings.open_marks(session, [r.id for r in page])
    return RunList(items=[run_out(r, marks.get(r.id)) for r in page], next_cursor=next_cursor)


@router.get("/{run_id}", dependencies=[ReadAccess])
def get_run(run: RunDep, session: SessionDep) -> RunOut:
    return run_out(run, findings.open_marks(session, [run.id]).get(run.id))


MAX_POINTS = 10_000
"""The most rows one metrics answer holds: a thinned view's max_points, and a page's limit
(about 8 MB of a step's ~30 scalars)."""
MaxPointsQuery = Annotated[
    int | None,
    Query(
        ge=10,
        le=MAX_POINTS,
        description="thin the range to at most this many rows (default 10,000): first and "
        "last step, every row of a sparse metric, and each bucket's lowest and highest row "
        "of every other metric; `thinned` says when it did",
    ),
]
PageLimitQuery = Annotated[
    int | None,
    Query(
        ge=1,
        le=MAX_POINTS,
        description="instead of thinning (max_points is then not used), a page of every "
        "step: at most this many, and `next_after_step` to ask the next page after",
    ),
]
BeforeStepQuery = Annotated[
    int | None, Query(ge=1, le=MAX_STEP, description="only steps before this one")
]


@router.get("/{run_id}/metrics", dependencies=[ReadAccess], response_model=MetricList)
async def get_metrics(
    run_id: RunIdPath,
    newest_event: RunVersionDep,
    after_step: AfterStepQuery = None,
    before_step: BeforeStepQuery = None,
    max_points: MaxPointsQuery = None,
    limit: PageLimitQuery = None,
    keys: MetricKeysQuery = None,
) -> Response:
    """Step scalars in step order, for curves; `keys` keeps only some metrics. Step 0 holds
    the evaluation before training (spec `eval`), when there is one, and nothing else.

    A range of more than `max_points` steps (10,000 unless asked) is answered thinned, never
    averaged: every row is a stored step, the first and the last are there, and of each bucket
    of consecutive steps every metric keeps its lowest and highest row (`thinned` gives the
    steps it stands for and the buckets). Every step, a page at a time: `limit` (which
    `max_points` does not change), then `after_step` = the answer's `next_after_step` until it
    is null."""
    key_list = tuple(k for k in (keys or "").split(",") if k)
    after = -1 if after_step is None else after_step
    points = None if limit is not None else max_points or MAX_POINTS
    key = ("metrics", run_id, newest_event, after, before_step, limit, points, key_list)
    body = await bodies.get(
        key,
        partial(db.read, _metrics_body, run_id, newest_event, after, before_step, limit, points,
                key_list),
    )  # fmt: skip
    return Response(content=body, media_type="application/json")


def _metrics_body(
    conn: Connection,
    run_id: str,
    newest_event: int,
    after_step: int,
    before_step: int | None,
    limit: int | None,
    max_points: int | None,
    keys: tuple[str, ...],
) -> str:
    if max_points is not None:
        return thinning.thinned_metrics_json(
            conn, run_id, after_step=after_step, before_step=before_step,
            max_points=max_points, keys=keys, after_event=newest_event,
        )  # fmt: skip
    if not keys:
        return steps.metrics_json(
            conn, run_id, after_step=after_step, before_step=before_step, limit=limit,
            after_event=newest_event,
        )  # fmt: skip
    one_more = None if limit is None else limit + 1
    rows = steps.list_metrics(conn, run_id, after_step=after_step, before_step=before_step,
                              limit=one_more, keys=list(keys))  # fmt: skip
    more = limit is not None and len(rows) > limit
    items = [MetricRow(**r) for r in rows[:limit]]
    next_after = items[-1].step if more else None
    page = MetricList(last_event_id=newest_event, items=items, next_after_step=next_after)
    return page.model_dump_json()


@router.get("/{run_id}/histograms", dependencies=[ReadAccess], response_model=HistogramList)
async def get_histograms(
    run_id: RunIdPath,
    newest_event: RunVersionDep,
    after_step: StepQuery = 0,
    limit: Annotated[int, Query(ge=1, le=1_000_000)] = 100_000,
) -> Response:
    """Each step's advantage, reward and group reward spread histograms, with their bins."""
    body = await bodies.get(
        ("histograms", run_id, newest_event, after_step, limit),
        partial(
            db.read,
            histograms.histograms_json,
            run_id,
            after_step=after_step,
            limit=limit,
            after_event=newest_event,
        ),
    )
    return Response(content=body, media_type="application/json")


@router.get("/{run_id}/logs", dependencies=[ReadAccess], response_model=LogList)
async def get_logs(
    run_id: RunIdPath,
    newest_event: RunVersionDep,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 1000,
) -> Response:
    key = ("logs", run_id, newest_event, limit)
    body = await bodies.get(key, partial(db.read, _logs_body, run_id, limit))
    return Response(content=body, media_type="application/json")


def _logs_body(conn: Connection, run_id: str, limit: int) -> str:
    rows = events.list_logs(conn, run_id, limit=limit)
    return LogList(items=[LogRow(**row) for row in rows]).model_dump_json()
