"""Checks on a JobSpec that need the server's settings: where local paths may point.

A model or dataset path in a request never reaches outside the allowed roots.
"""

from __future__ import annotations

from pathlib import Path

from app.api.errors import ApiError
from app.settings import Settings
from app.store import datasets
from grpo.spec import JobSpec


def _is_local_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~")) or value.endswith(".jsonl")


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def check_spec(spec: JobSpec, settings: Settings) -> None:
    """Raise a 422 naming the field when a path leaves the allowed roots or a dataset is unknown."""
    model_roots = settings.model_root_list
    if _is_local_path(spec.model):
        path = Path(spec.model).expanduser().resolve()
        if not _inside(path, model_roots):
            allowed = ", ".join(str(r) for r in model_roots) or "none configured (GRPO_MODEL_ROOTS)"
            _reject(
                "model", f"local model path {spec.model!r} is outside the allowed roots: {allowed}"
            )
    source = spec.data.source
    if source.startswith("dataset:"):
        if datasets.get_dataset(source.removeprefix("dataset:")) is None:
            _reject("data.source", f"unknown dataset {source!r}; upload it with POST /api/datasets")
    elif _is_local_path(source):
        path = Path(source).expanduser().resolve()
        if not _inside(path, [settings.datasets_dir, *model_roots]):
            _reject("data.source", f"local dataset path {source!r} is outside the allowed roots")


def _reject(loc: str, message: str) -> None:
    fields = [{"loc": loc, "message": message}]
    raise ApiError(422, "validation_error", f"invalid job spec: {loc}: {message}", fields)
