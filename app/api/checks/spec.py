"""Checks on a JobSpec that need the server's settings: where local paths may point.

A model or dataset path in a request never reaches outside the allowed roots; what counts
as a path is grpo/spec/sources.py's one definition, which the worker applies again before it
opens anything. Refusals never say whether something outside the roots exists.
"""

from __future__ import annotations

from app.api.errors import ApiError
from app.settings import Settings
from app.store import datasets
from app.store.db import Session
from grpo.spec import JobSpec
from grpo.spec.hub import hub_model_problem
from grpo.spec.record_files import system_prompt_clash
from grpo.spec.sources import (
    LocalRoots,
    parse_data_source,
    parse_model_name,
    resolve_local,
    uploaded_dataset_path,
)


def check_spec(spec: JobSpec, settings: Settings, session: Session) -> None:
    """Raise a 422 naming the field when a path leaves the allowed roots or a dataset is unknown."""
    check_no_nul(spec.model_dump(mode="json"), "")
    check_model_path(spec.model, settings)
    check_data_source(spec.data.source, settings, session)
    if spec.data.system_prompt:
        check_system_prompt(spec, settings)
    if spec.eval is not None and spec.eval.source is not None:
        check_data_source(spec.eval.source, settings, session, loc="eval.source")


def check_model_path(model: str, settings: Settings, *, loc: str = "model") -> None:
    source = parse_model_name(model)
    if source.kind == "local" and (problem := local_model_problem(source.value, settings)):
        _reject(loc, problem)
    if source.kind == "hub" and (problem := hub_problem(source.value, settings)):
        _reject(loc, problem)


def hub_problem(repo_id: str, settings: Settings) -> str | None:
    """Why a Hugging Face model id (the policy's, a reward model's) cannot be loaded from
    this machine; None when it can or the server is told not to ask."""
    if not settings.check_hub_models or (problem := hub_model_problem(repo_id)) is None:
        return None
    return f"{problem} (workers with caches of their own: GRPO_CHECK_HUB_MODELS=false)"


def local_model_problem(path: str, settings: Settings) -> str | None:
    """Why a local model path may not be used here (None: it may)."""
    roots = LocalRoots(settings.local_path_base, tuple(settings.model_root_list))
    try:
        resolve_local(path, roots, what="local model path")
    except ValueError as exc:
        if not settings.model_root_list:
            return f"{exc}; set GRPO_MODEL_ROOTS to allow local models"
        return str(exc)
    return None


def check_data_source(
    text: str, settings: Settings, session: Session, *, loc: str = "data.source"
) -> None:
    source = parse_data_source(text)
    if source.kind == "dataset":
        if datasets.get_dataset(session, source.value) is None:
            _reject(loc, f"unknown dataset {text!r}; upload it with POST /api/datasets")
    elif source.kind == "local":
        roots = LocalRoots(settings.local_path_base, tuple(settings.data_root_list))
        try:
            resolve_local(source.value, roots, what="local dataset path")
        except ValueError as exc:
            _reject(loc, str(exc))


def check_system_prompt(spec: JobSpec, settings: Settings) -> None:
    """A 422 naming data.system_prompt when the dataset's prompts carry their own system turn
    (uploaded and local files, scanned a record at a time; hub datasets when they load)."""
    source = parse_data_source(spec.data.source)
    if source.kind == "dataset":
        path = uploaded_dataset_path(source.value, settings.datasets_dir)
    elif source.kind == "local":
        roots = LocalRoots(settings.local_path_base, tuple(settings.data_root_list))
        path = resolve_local(source.value, roots, what="local dataset path")
    else:
        return
    if path.is_file() and (clash := system_prompt_clash(path, spec.data.prompt_field)):
        _reject("data.system_prompt", clash)


def check_no_nul(value: object, loc: str) -> None:
    """NUL characters cannot be stored (PostgreSQL refuses them in text and JSON). Walks
    with a stack of its own: no depth of nesting makes it recurse (the JSON rule of
    grpo/spec/json_values.py bounds a spec's depth before it gets here)."""
    stack = [(value, loc)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            _reject(where, "must not contain NUL characters")
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                stack.append((child, f"{where}.{key}" if where else str(key)))
                stack.append((key, where))
        elif isinstance(item, list):
            stack.extend((child, f"{where}.{i}") for i, child in reversed(list(enumerate(item))))


def _reject(loc: str, message: str) -> None:
    fields = [{"loc": loc, "message": message}]
    raise ApiError(422, "validation_error", f"invalid job spec: {loc}: {message}", fields)
