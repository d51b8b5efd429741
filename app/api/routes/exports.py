"""Exports: a run's metrics as CSV or JSONL (with each step's histograms), its groups as
JSONL, streamed."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from app.api.deps import ReadAccess, RunDep
from app.api.errors import ApiError
from app.api.responses import errors, text_body
from app.store import db, histograms, steps

router = APIRouter(
    prefix="/api/runs", tags=["export"], dependencies=[ReadAccess], responses=errors(404)
)


GROUPS_PAGE = 1000
"""Groups read per borrowed connection: no session is held while a body streams."""


def metrics_csv(run_id: str) -> Iterator[str]:
    rows = db.read(steps.list_metrics, run_id)
    keys = sorted({k for r in rows for k in r["metrics"]})
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["step", *keys])
    for row in rows:
        writer.writerow([row["step"], *(row["metrics"].get(k, "") for k in keys)])
        if buffer.tell() > 64_000:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def metrics_jsonl(run_id: str) -> Iterator[str]:
    """One line per step: its scalars and its fixed-bin histograms (bins as in /histograms)."""
    by_step = {row.pop("step"): row for row in db.read(histograms.list_histograms, run_id)}
    for row in db.read(steps.list_metrics, run_id):
        yield json.dumps({**row, **by_step.get(row["step"], {})}) + "\n"


def groups_jsonl(run_id: str) -> Iterator[str]:
    after = (0, -1)
    while True:
        page = db.read(steps.groups_after, run_id, after, limit=GROUPS_PAGE)
        yield from (json.dumps(group) + "\n" for group in page)
        if len(page) < GROUPS_PAGE:
            return
        after = (page[-1]["step"], page[-1]["index"])


@router.get(
    "/{run_id}/export",
    response_class=StreamingResponse,
    responses=text_body(
        "The file: CSV, or one JSON object a line", "text/csv", "application/x-ndjson"
    ),
)
def export_run(
    run: RunDep,
    format: Literal["csv", "jsonl"] = "csv",
    what: Annotated[Literal["metrics", "groups"], Query()] = "metrics",
) -> StreamingResponse:
    """Download metrics (csv or jsonl) or every group (jsonl)."""
    if what == "groups" and format != "jsonl":
        raise ApiError(422, "validation_error", "groups export only as format=jsonl")
    if what == "groups":
        body, media = groups_jsonl(run.id), "application/x-ndjson"
    elif format == "csv":
        body, media = metrics_csv(run.id), "text/csv"
    else:
        body, media = metrics_jsonl(run.id), "application/x-ndjson"
    filename = f"{run.id}-{what}.{format}"
    return StreamingResponse(
        body,
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
