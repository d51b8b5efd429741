"""Where a run trains outside the service (`grpo train`, the Python API): the GRPO_*
variables of this process that the service's settings also read (app/settings.py), read the
same way, so that a spec finds the same built-in models, plugin files and MLflow store from
every door. The only place in grpo/ that reads the environment.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(given: str | os.PathLike[str] | None = None) -> Path:
    """Built-in models: `given`, else GRPO_CACHE_DIR, else ~/.cache/grpo."""
    return Path(given or os.environ.get("GRPO_CACHE_DIR") or "~/.cache/grpo").expanduser()


def plugin_dirs() -> tuple[Path, ...]:
    """GRPO_PLUGIN_DIRS' folders (os.pathsep between them), resolved; unset:
    `<GRPO_DATA_DIR, default data>/plugins`, where `grpo plugins add` copies files."""
    value = os.environ.get("GRPO_PLUGIN_DIRS")
    if value is None:
        return (Path(os.environ.get("GRPO_DATA_DIR") or "data").resolve() / "plugins",)
    return tuple(Path(p.strip()).resolve() for p in value.split(os.pathsep) if p.strip())


def mlflow_uri() -> str | None:
    """GRPO_MLFLOW_URI (None: a SQLite store in the run's workdir)."""
    return os.environ.get("GRPO_MLFLOW_URI") or None
