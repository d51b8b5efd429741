"""Where a run trains: its directories, what it may reach, and the callables of this
process its rewards may call. The door that starts a run fills it in (the worker from the
service's settings, `grpo train` from its options and GRPO_* variables, the Python API from
its arguments); the spec says what to train, this says where. Knows nothing of torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo.spec.sources import LocalRoots
from grpo.spec.vllm import DEFAULT_VLLM_SERVER_HOSTS


@dataclass(frozen=True)
class RunEnvironment:
    workdir: Path
    """Checkpoints, tracker files, vLLM's own: `<workdir>/...`."""
    cache_dir: Path
    """Built-in models (GRPO_CACHE_DIR, default ~/.cache/grpo)."""
    run_id: str = ""
    """The service's run id (its trackers' run name); "" outside the service (the run is
    named after its workdir)."""
    datasets_dir: Path | None = None
    model_roots: LocalRoots | None = None
    data_roots: LocalRoots | None = None
    reward_hosts: tuple[str, ...] = ()
    """The `host[:port]`s that `http` rewards may call."""
    token_envs: tuple[str, ...] = ()
    """Variables besides GRPO_REWARD_TOKEN_* an `http` reward's `token_env` may name."""
    tool_hosts: tuple[str, ...] | None = None
    """Those `http` tools may call (None: the reward hosts)."""
    vllm_server_hosts: tuple[str, ...] = DEFAULT_VLLM_SERVER_HOSTS
    """Where a `vllm_mode: server` run's vLLM server may be (GRPO_VLLM_SERVER_HOSTS)."""
    plugin_dirs: tuple[Path, ...] = ()
    """Folders whose files' functions `python` rewards and tools may name (GRPO_PLUGIN_DIRS)."""
    reward_functions: Mapping[str, Callable[..., Any]] | None = None
    """Callables of this process for the `python` entries naming them (the Python API)."""
    mlflow_uri: str | None = None
    """MLflow's tracking URI (None: a SQLite store in the workdir)."""
    progress: bool = False
    """Show the progress of a first-use model build on the terminal."""
