"""Start the ranks of one run on this machine with torch's elastic launcher, the API
behind `torchrun` (torch.distributed.launcher.api.elastic_launch).

The launcher spawns `num_processes` processes, runs a c10d rendezvous on a free port
(`localhost:0`, as `torchrun --standalone` does), sets RANK / WORLD_SIZE / LOCAL_RANK /
MASTER_ADDR / MASTER_PORT for each, and supervises them: when one rank exits with an
error or is killed, it stops the others and raises ChildFailedError naming the rank, so
no rank outlives a failed run. Nothing is restarted (max_restarts 0): a run's steps are
not idempotent, so a failed run is resumed from its checkpoint, not re-run in place.
Across nodes the same launcher takes a shared rendezvous endpoint and the node count
(`grpo train --nnodes --rdzv-endpoint`, docs/scaling.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from grpo.distributed import Ranks, current_ranks

__all__ = [
    "ChildFailedError",
    "RankError",
    "SignalException",
    "failure_message",
    "init_rank",
    "is_launched",
    "launch_ranks",
]


class RankError(RuntimeError):
    """What a rank raises with a message worded for the user; failure_message reads it back
    from the launcher's error file."""


def launch_ranks(
    entry: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    num_processes: int,
    run_id: str,
    nodes: int = 1,
    rdzv_endpoint: str = "localhost:0",
    log_dir: Path | None = None,
) -> Any:
    """Run `entry(*args)` in `num_processes` ranks on this machine; the return value of the
    lowest rank here (rank 0 on the node that got it).

    `entry` must be a module-level function (the ranks are spawned, not forked) that
    calls init_rank first. Raises ChildFailedError when any rank fails. Over `nodes`
    machines, each node calls this with the same `run_id` and a `rdzv_endpoint` (host:port
    of one of them) that all reach, as `torchrun --nnodes --rdzv-endpoint` does. `log_dir`:
    where the launcher keeps each rank's error file (default a fresh temporary folder).
    """
    config = LaunchConfig(
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir)) if log_dir else None,
        min_nodes=nodes,
        max_nodes=nodes,
        nproc_per_node=num_processes,
        run_id=run_id,
        rdzv_backend="c10d",
        rdzv_endpoint=rdzv_endpoint,
        max_restarts=0,
        monitor_interval=0.5,
        start_method="spawn",
    )
    returned = elastic_launch(config, entry)(*args)  # {global rank: value} of this node's ranks
    return returned[min(returned)]


def is_launched() -> bool:
    """True in a process the launcher started (it sets the rank's environment)."""
    return "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ


def failure_message(exc: ChildFailedError, *, num_processes: int) -> str:
    """One line naming the rank that failed first and how: its RankError's message, its
    exception, or the signal that killed it."""
    rank, failure = exc.get_first_failure()
    message: Any = failure.message
    if failure.exitcode < 0:
        what = f"was killed by {failure.signal_name()}"
    elif isinstance(message, dict):  # its exception, from the error file: "Type: text"
        what = "failed: " + str(message.get("message")).removeprefix(f"{RankError.__name__}: ")
    else:  # it exited without an exception (no error file)
        what = f"exited with code {failure.exitcode}"
    return (
        f"rank {rank} of {num_processes} (pid {failure.pid}) {what}; every rank of the run "
        "was stopped"
    )


def uses_cuda(device: str) -> bool:
    """Whether the ranks of a run on `device` take one GPU each (NCCL) rather than the CPU."""
    return device != "cpu" and torch.cuda.is_available()


def init_rank(device: str) -> Ranks:
    """In a launched rank: join the run's process group, NCCL with one GPU per rank on
    CUDA, gloo with one torch thread per rank on CPU (ranks share the cores)."""
    is_cuda = uses_cuda(device)
    if is_cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    else:
        torch.set_num_threads(1)
    dist.init_process_group("nccl" if is_cuda else "gloo")
    return current_ranks()


def leave_group() -> None:
    """Destroy the process group, if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
