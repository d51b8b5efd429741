"""What a spec's `model` and `data.source` point at, and where a local path may lead.

One definition for both sides: the API refuses a spec whose local paths leave the allowed
roots, and the library re-checks the same rule right before it opens anything (defence in
depth: a spec stored before a root was removed, or edited in the database, still cannot
read outside). Kinds, by the text's prefix:

- `builtin:<name>`  a built-in model or task
- `dataset:<id>`    an uploaded dataset (data only)
- `hf:<id>`         a Hugging Face hub id; for models a plain `org/name` id is one too
- `file:<path>`     a local path; for data any text without one of these prefixes is a
                    path too, for models only one that starts with `/`, `./`, `../` or `~`

A relative path resolves against the stated `LocalRoots.base`, never the process's working
directory. Errors about a path outside the roots are the same whether or not it exists, and
the same from the API's refusal and the worker's re-check: `OutsideRoots` words how paths
resolve and what to do, naming the service's settings (only the service sets roots; `grpo
train` trusts its user). Standard library only (the API imports it: no torch). Reads no
settings and knows nothing of HTTP.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SourceKind = Literal["builtin", "dataset", "hub", "local"]
PathKind = Literal["model", "data"]
"""What a local path is for: a model directory, or a data file (`data.source`, `eval.source`)."""
_PATH_NAMES: dict[PathKind, str] = {"model": "local model path", "data": "local dataset path"}

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):")
_HUB_PART = r"[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9_])?"
_HUB_ID = re.compile(rf"^(?:{_HUB_PART}/)?{_HUB_PART}$")
"""Hugging Face repo ids: `name` or `org/name`; `..` and `--` are refused below, as the hub does."""
_DATASET_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_PATH_PREFIXES = ("/", "./", "../", "~")


@dataclass(frozen=True)
class Source:
    """A parsed model name or data source: its kind and the rest of the text."""

    kind: SourceKind
    value: str
    """builtin: the whole `builtin:x`; dataset: the id; hub: the id (data: `repo[:config]`);
    local: the path as written, without `file:`."""


@dataclass(frozen=True)
class LocalRoots:
    """Where local paths of a spec may lead, and what relative ones are relative to."""

    base: Path
    """Relative paths are joined to this directory."""
    allowed: tuple[Path, ...] | None
    """A local path must resolve (symlinks followed) into one of these; None: anywhere
    (a trusted caller such as `grpo train` on the user's own machine); empty: nowhere."""


def _is_hub_id(text: str) -> bool:
    return bool(_HUB_ID.fullmatch(text)) and ".." not in text and "--" not in text


def parse_data_source(text: str) -> Source:
    """The kind of a `data.source`; ValueError for an unknown scheme or a malformed id."""
    scheme = _scheme(text)
    match scheme:
        case "builtin":
            return Source("builtin", text)
        case "dataset":
            dataset_id = text.removeprefix("dataset:")
            if not _DATASET_ID.fullmatch(dataset_id):
                raise ValueError(f"invalid dataset id {dataset_id!r}: use letters, digits, _ and -")
            return Source("dataset", dataset_id)
        case "hf":
            name = text.removeprefix("hf:")
            if not _is_hub_id(name.partition(":")[0]):
                raise ValueError(f"{text!r} is not a Hugging Face dataset id (hf:org/name)")
            return Source("hub", name)
        case "file":
            return Source("local", _local_text(text.removeprefix("file:")))
        case None:
            return Source("local", _local_text(text))
    raise ValueError(
        f"unknown source kind {scheme + ':'!r}; use builtin:, dataset:<id>, hf:<name> or a path"
    )


def parse_model_name(text: str) -> Source:
    """The kind of a spec's `model`; ValueError for anything that is neither kind cleanly."""
    scheme = _scheme(text)
    if scheme == "builtin":
        return Source("builtin", text)
    if scheme == "file":
        return Source("local", _local_text(text.removeprefix("file:")))
    if scheme == "hf" or (scheme is None and not text.startswith(_PATH_PREFIXES)):
        name = text.removeprefix("hf:")
        if not _is_hub_id(name):
            raise ValueError(
                f"{text!r} is neither a Hugging Face model id (org/name) nor a local path "
                "(write local paths as /abs/dir, ./dir or file:dir)"
            )
        return Source("hub", name)
    if scheme is None:
        return Source("local", _local_text(text))
    raise ValueError(f"unknown model kind {scheme + ':'!r}; use builtin:, hf:<id> or a path")


def _scheme(text: str) -> str | None:
    found = _SCHEME.match(text)
    return found.group(1) if found else None


def _local_text(path: str) -> str:
    if not path.strip():
        raise ValueError("a local path must not be empty")
    if "\x00" in path:
        raise ValueError("a local path must not contain NUL characters")
    return path


def resolve_local(path: str, roots: LocalRoots, *, kind: PathKind) -> Path:
    """The absolute, symlink-free path of `path`, which must lie inside `roots.allowed`.

    `~` is the home of the user running this process. The refusal names the text as given
    and the roots, never whether anything exists there.
    """
    expanded = Path(path).expanduser() if path.startswith("~") else Path(path)
    joined = roots.base / expanded  # an absolute `expanded` replaces base
    try:
        resolved = joined.resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
        lexical = Path(os.path.normpath(joined))
        if roots.allowed is not None and not is_inside(lexical, roots.allowed):
            raise _outside(path, roots, kind) from None
        raise ValueError(f"{_PATH_NAMES[kind]} {path!r} leads into a symlink loop") from None
    if roots.allowed is not None and not is_inside(resolved, roots.allowed):
        raise _outside(path, roots, kind)
    return resolved


class OutsideRoots(ValueError):
    """A local path that resolves outside the allowed roots, worded with how paths resolve
    and what to do: the API's refusal at submit and the worker's re-check before it opens
    anything (a spec stored before a root was removed) say this one text."""


_READ_AT_START = "a setting the service reads when it starts: restart it after changing it"


def _outside(path: str, roots: LocalRoots, kind: PathKind) -> OutsideRoots:
    """The refusal of `path`; `roots` as the service builds them (app/settings.py): base
    GRPO_DATA_DIR, models in GRPO_MODEL_ROOTS, data in GRPO_DATA_DIR/datasets or those."""
    allowed = roots.allowed or ()
    listed = ", ".join(str(r) for r in allowed) or "none configured"
    said = (
        f"{_PATH_NAMES[kind]} {path!r} is outside the allowed roots ({listed}): a relative "
        f"path resolves against GRPO_DATA_DIR ({roots.base}); "
    )
    if kind == "model":
        add = "add the model's directory to" if allowed else "set"
        return OutsideRoots(
            f"{said}local models must lie inside GRPO_MODEL_ROOTS (comma-separated "
            f"directories; {add} it to allow this one), {_READ_AT_START}"
        )
    return OutsideRoots(
        f"{said}local data files must lie inside GRPO_DATA_DIR/datasets (the uploaded "
        f"datasets) or GRPO_MODEL_ROOTS, {_READ_AT_START}; or upload it as a dataset "
        "(`grpo submit` does this for you)"
    )


def is_inside(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether resolved `path` is one of `roots` or below one (roots are resolved here)."""
    resolved_roots = [root.resolve() for root in roots]
    return any(path == root or root in path.parents for root in resolved_roots)


def uploaded_dataset_path(dataset_id: str, datasets_dir: Path | None) -> Path:
    """`datasets_dir/<id>.parquet` for a parquet upload, else `<id>.jsonl`; the id pattern
    keeps the path inside datasets_dir."""
    if datasets_dir is None:
        raise ValueError("dataset:<id> sources need a datasets directory")
    source = parse_data_source(f"dataset:{dataset_id}")
    parquet = Path(datasets_dir) / f"{source.value}.parquet"
    return parquet if parquet.is_file() else Path(datasets_dir) / f"{source.value}.jsonl"
