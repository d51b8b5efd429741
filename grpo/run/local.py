"""Where a run trains outside the service (`grpo train`, the Python API): the GRPO_*
variables of this process that the service's settings also read (app/settings.py), read the
same way, so that a spec finds the same built-in models, plugin files and MLflow store from
every door. The only place in grpo/ that reads the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

from grpo.spec.endpoints import host_entries
from grpo.spec.vllm import DEFAULT_VLLM_SERVER_HOSTS


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


def vllm_server_hosts() -> tuple[str, ...]:
    """GRPO_VLLM_SERVER_HOSTS' `host[:port]`s, where a server-mode run's vLLM server may be;
    unset: this machine only (DEFAULT_VLLM_SERVER_HOSTS), as on the service."""
    value = os.environ.get("GRPO_VLLM_SERVER_HOSTS")
    return DEFAULT_VLLM_SERVER_HOSTS if value is None else tuple(host_entries(value))


def mlflow_uri() -> str | None:
    """GRPO_MLFLOW_URI (None: a SQLite store in the run's workdir)."""
    return os.environ.get("GRPO_MLFLOW_URI") or None
