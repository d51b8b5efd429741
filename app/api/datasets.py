"""Uploaded prompt sets: POST a JSONL body, then name it in a spec as `dataset:<id>`."""

from __future__ import annotations

import re
import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request

from app.api.deps import ReadAccess, SettingsDep, WriteAccess
from app.api.errors import ApiError
from app.api.schemas import DatasetList, DatasetOut
from app.store import datasets
from app.store.models import Dataset
from grpo.records import RecordError, parse_record_line

router = APIRouter(prefix="/api/datasets", tags=["datasets"])
FieldName = Annotated[str, Query(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")]


def dataset_out(d: Dataset) -> DatasetOut:
    return DatasetOut(
        id=d.id,
        name=d.name,
        num_records=d.num_records,
        num_bytes=d.num_bytes,
        fields=list(d.fields),
        created_at=d.created_at.isoformat(),
        source=f"dataset:{d.id}",
    )


def _bad(message: str) -> ApiError:
    return ApiError(422, "invalid_dataset", message)


def validate_jsonl(
    body: bytes, *, prompt_field: str, answer_field: str, max_lines: int
) -> list[str]:
    """Check UTF-8 and every record as the trainer will read it (grpo/records.py); return
    the fields the records have."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(f"not UTF-8 at byte {exc.start}") from exc
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not numbered:
        raise _bad("dataset is empty")
    if len(numbered) > max_lines:
        raise _bad(f"{len(numbered)} records; at most {max_lines} are accepted")
    fields: set[str] = {prompt_field, answer_field}
    for number, line in numbered:
        try:
            record = parse_record_line(
                line, prompt_field=prompt_field, answer_field=answer_field, where=f"line {number}"
            )
        except RecordError as exc:
            raise _bad(str(exc)) from exc
        fields |= set(record.data)
    return sorted(fields)


@router.post("", status_code=201, dependencies=[WriteAccess])
async def upload_dataset(
    request: Request,
    settings: SettingsDep,
    name: Annotated[str, Query(min_length=1, max_length=200)],
    prompt_field: FieldName = "prompt",
    answer_field: FieldName = "answer",
) -> DatasetOut:
    """Body: JSONL, one record per line: the prompt field (text or chat messages), the
    answer field, and any other fields (handed to reward functions)."""
    body = await request.body()
    if len(body) > settings.max_dataset_bytes:
        raise ApiError(
            413, "payload_too_large", f"dataset exceeds {settings.max_dataset_bytes} bytes"
        )
    fields = validate_jsonl(
        body,
        prompt_field=prompt_field,
        answer_field=answer_field,
        max_lines=settings.max_dataset_lines,
    )
    dataset_id = uuid.uuid4().hex[:16]
    assert re.fullmatch(r"[0-9a-f]{16}", dataset_id)
    settings.datasets_dir.mkdir(parents=True, exist_ok=True)
    (settings.datasets_dir / f"{dataset_id}.jsonl").write_bytes(body)
    row = datasets.add_dataset(
        Dataset(
            id=dataset_id,
            name=name,
            num_records=sum(1 for ln in body.splitlines() if ln.strip()),
            num_bytes=len(body),
            fields=fields,
        )
    )
    return dataset_out(row)


@router.get("", dependencies=[ReadAccess])
def list_datasets() -> DatasetList:
    return DatasetList(items=[dataset_out(d) for d in datasets.list_datasets()])
