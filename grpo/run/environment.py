"""Where a run trains: its directories, what it may reach, and the callables of this
process its rewards may call. The door that starts a run fills it in (the worker from the
service's settings, `grpo train` from its options and GRPO_* variables, the Python API from
its arguments); the spec says what to train, this says where. Knows nothing of torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grpo.training.reach import RunReach

__all__ = ["RunEnvironment", "RunReach"]


@dataclass(frozen=True)
class RunEnvironment:
    workdir: Path
    """Checkpoints, tracker files, vLLM's own: `<workdir>/...`."""
    cache_dir: Path
    """Built-in models (GRPO_CACHE_DIR, default ~/.cache/grpo)."""
    run_id: str = ""
    """The service's run id (its trackers' run name); "" outside the service (the run is
    named after its workdir)."""
    reach: RunReach = RunReach()
    """What the run may read and call beyond its spec: datasets, local roots, hosts, plugin
    folders, this process's reward callables."""
    mlflow_uri: str | None = None
    """MLflow's tracking URI (None: a SQLite store in the workdir)."""
    progress: bool = False
    """Show the progress of a first-use model build on the terminal."""
