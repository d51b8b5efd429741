"""Checks on a JobSpec that need the server's settings: where local paths may point.

A model or dataset path in a request never reaches outside the allowed roots; what counts
as a path is grpo/spec/sources.py's one definition, which the worker applies again before it
opens anything. Refusals never say whether something outside the roots exists. Every
problem is found, not only the first (app/api/checks/refusal.py).
"""

from __future__ import annotations

from app.api.checks.refusal import Problem, problem, refuse
from app.settings import Settings
from app.store import datasets
from app.store.db import Session
from grpo.data.record_files import system_prompt_clash
from grpo.spec import JobSpec
from grpo.spec.hub import hub_model_problem
from grpo.spec.sources import (
    LocalRoots,
    parse_data_source,
    parse_model_name,
    resolve_local,
    uploaded_dataset_path,
)


def check_spec(spec: JobSpec, settings: Settings, session: Session) -> None:
    """Raise a 422 naming each field whose path leaves the allowed roots or whose dataset
    is unknown."""
    refuse(path_problems(spec, settings, session))


def path_problems(spec: JobSpec, settings: Settings, session: Session) -> list[Problem]:
    """NUL characters, models and datasets this server refuses, and a system prompt the
    dataset's own system turns clash with: every one, each naming its field."""
    found = nul_problems(spec.model_dump(mode="json"), "")
    if found:  # no string with a NUL goes further: not to the database, the disk or the hub
        return found
    found += model_path_problems(spec.model, settings)
    found += data_source_problems(spec.data.source, settings, session)
    if spec.data.system_prompt:
        found += system_prompt_problems(spec, settings)
    if spec.eval is not None and spec.eval.source is not None:
        found += data_source_problems(spec.eval.source, settings, session, loc="eval.source")
    return found


def model_path_problems(model: str, settings: Settings, *, loc: str = "model") -> list[Problem]:
    source = parse_model_name(model)
    if source.kind == "local" and (why := local_model_problem(source.value, settings)):
        return [problem(loc, why)]
    if source.kind == "hub" and (why := hub_problem(source.value, settings)):
        return [problem(loc, why)]
    return []


def hub_problem(repo_id: str, settings: Settings) -> str | None:
    """Why a Hugging Face model id (the policy's, a reward model's) cannot be loaded from
    this machine; None when it can or the server is told not to ask."""
    if not settings.check_hub_models or (problem := hub_model_problem(repo_id)) is None:
        return None
    return f"{problem} (workers with caches of their own: GRPO_CHECK_HUB_MODELS=false)"


def local_model_problem(path: str, settings: Settings) -> str | None:
    """Why a local model path may not be used here (None: it may); outside the roots, in
    the words the worker's re-check uses too (grpo/spec/sources.py's OutsideRoots)."""
    roots = LocalRoots(settings.local_path_base, tuple(settings.model_root_list))
    try:
        resolve_local(path, roots, kind="model")
    except ValueError as exc:
        return str(exc)
    return None


def data_source_problems(
    text: str, settings: Settings, session: Session, *, loc: str = "data.source"
) -> list[Problem]:
    source = parse_data_source(text)
    if source.kind == "dataset":
        if datasets.get_dataset(session, source.value) is None:
            return [problem(loc, f"unknown dataset {text!r}; upload it with POST /api/datasets")]
    elif source.kind == "local":
        roots = LocalRoots(settings.local_path_base, tuple(settings.data_root_list))
        try:
            resolve_local(source.value, roots, kind="data")
        except ValueError as exc:
            return [problem(loc, str(exc))]
    return []


def system_prompt_problems(spec: JobSpec, settings: Settings) -> list[Problem]:
    """data.system_prompt when the dataset's prompts carry their own system turn (uploaded
    and local files, scanned a record at a time; hub datasets when they load)."""
    source = parse_data_source(spec.data.source)
    if source.kind == "dataset":
        path = uploaded_dataset_path(source.value, settings.datasets_dir)
    elif source.kind == "local":
        roots = LocalRoots(settings.local_path_base, tuple(settings.data_root_list))
        try:
            path = resolve_local(source.value, roots, kind="data")
        except ValueError:  # data.source's own problem, found by data_source_problems
            return []
    else:
        return []
    if path.is_file() and (clash := system_prompt_clash(path, spec.data.prompt_field)):
        return [problem("data.system_prompt", clash)]
    return []


def nul_problems(value: object, loc: str) -> list[Problem]:
    """NUL characters cannot be stored (PostgreSQL refuses them in text and JSON). Walks
    with a stack of its own: no depth of nesting makes it recurse (the JSON rule of
    grpo/spec/json_values.py bounds a spec's depth before it gets here)."""
    found = []
    stack = [(value, loc)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            found.append(problem(where, "must not contain NUL characters"))
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                stack.append((child, f"{where}.{key}" if where else str(key)))
                stack.append((key, where))
        elif isinstance(item, list):
            stack.extend((child, f"{where}.{i}") for i, child in reversed(list(enumerate(item))))
    return found
