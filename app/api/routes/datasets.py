"""Uploaded prompt sets: POST a JSONL body, then name it in a spec as `dataset:<id>`."""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from app.api.checks.jsonl import check_jsonl_file
from app.api.checks.parquet import check_parquet_file
from app.api.deps import ReadAccess, SessionDep, SettingsDep, WriteAccess
from app.api.errors import ApiError
from app.api.guards import JSONL_TYPES, PARQUET_TYPES
from app.api.params import NameQuery
from app.api.responses import WRITES, errors
from app.api.schemas import DatasetList, DatasetOut
from app.settings import Settings
from app.store import datasets
from app.store.models import Dataset
from grpo.data.dataset_limits import DatasetLimits
from grpo.data.parquet import is_parquet

router = APIRouter(prefix="/api/datasets", tags=["datasets"])
FieldName = Annotated[str, Query(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")]
AnswerFieldName = Annotated[
    str,
    Query(
        pattern=r"^([A-Za-z_][A-Za-z0-9_\-]{0,63})?$",
        description="The records' answer column; empty: they have none (answer_field null)",
    ),
]


LISTED_FIELDS = 32
"""Most field names each dataset shows in GET /api/datasets (`num_fields` counts them all)."""


def dataset_out(d: Dataset, most_fields: int | None = None) -> DatasetOut:
    """The dataset; its first `most_fields` field names only, given a number."""
    names = list(d.fields)
    return DatasetOut(
        id=d.id,
        name=d.name,
        num_records=d.num_records,
        num_bytes=d.num_bytes,
        fields=names[:most_fields],
        num_fields=len(names),
        created_at=d.created_at.isoformat(),
        source=f"dataset:{d.id}",
    )


def dataset_limits(settings: Settings) -> DatasetLimits:
    """The upload limits, one per setting of the same name."""
    return DatasetLimits(**{f.name: getattr(settings, f.name) for f in fields(DatasetLimits)})


UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            media: {
                "schema": {"type": "string"},
                "example": '{"prompt": "2+2=", "answer": "4"}\n{"prompt": "3+5=", "answer": 8}\n',
            }
            for media in JSONL_TYPES
        }
        | {media: {"schema": {"type": "string", "format": "binary"}} for media in PARQUET_TYPES},
    }
}


@router.post(
    "",
    status_code=201,
    dependencies=[WriteAccess],
    responses=errors(*WRITES),
    openapi_extra=UPLOAD_BODY,
)
async def upload_dataset(
    request: Request,
    settings: SettingsDep,
    session: SessionDep,
    name: NameQuery,
    prompt_field: FieldName = "prompt",
    answer_field: AnswerFieldName = "answer",
) -> DatasetOut:
    """Body: JSONL (`application/x-ndjson`), one record per line, or a parquet file
    (`application/vnd.apache.parquet`), one record per row, with the prompt and answer
    fields. Streamed to a file while counting (413 past GRPO_MAX_DATASET_BYTES), checked in a
    worker thread a line or a record batch at a time, then moved into place. Bounded by
    shape too: a 422 past the records, columns or nesting allowed, a 413 past a line's or
    row's size, a parquet file's decoded size, a column chunk's or its footer's (each
    message names the setting)."""
    settings.datasets_dir.mkdir(parents=True, exist_ok=True)
    upload = await receive_to_file(request, settings.datasets_dir, settings.max_dataset_bytes)
    try:
        suffix = "parquet" if is_parquet(upload) else "jsonl"
        summary = await run_in_threadpool(
            check_parquet_file if suffix == "parquet" else check_jsonl_file,
            upload,
            prompt_field=prompt_field,
            answer_field=answer_field or None,
            limits=dataset_limits(settings),
        )
        dataset_id = uuid.uuid4().hex[:16]
        row = Dataset(
            id=dataset_id,
            name=name,
            num_records=summary.num_records,
            num_bytes=upload.stat().st_size,
            fields=summary.fields,
        )
        upload.rename(settings.datasets_dir / f"{dataset_id}.{suffix}")
    finally:
        upload.unlink(missing_ok=True)
    return dataset_out(await run_in_threadpool(datasets.add_dataset, session, row))


async def receive_to_file(request: Request, folder: Path, max_bytes: int) -> Path:
    """The request body, written to a hidden file in `folder`; 413 once it passes max_bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    handle = tempfile.NamedTemporaryFile(dir=folder, prefix=".upload-", delete=False)  # noqa: SIM115
    path = Path(handle.name)
    try:
        with handle:
            received = 0
            async for chunk in request.stream():
                received += len(chunk)
                if received > max_bytes:
                    raise _too_large(max_bytes)
                handle.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def _too_large(max_bytes: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"dataset exceeds {max_bytes} bytes")


@router.get("", dependencies=[ReadAccess])
def list_datasets(session: SessionDep) -> DatasetList:
    """Every dataset, each with its first 32 field names and `num_fields`."""
    items = [dataset_out(d, LISTED_FIELDS) for d in datasets.list_datasets(session)]
    return DatasetList(items=items)
