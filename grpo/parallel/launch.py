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

import gc
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch
from torch.distributed.tensor.debug import _clear_sharding_prop_cache

from grpo.cause import Cause
from grpo.failures import user_message
from grpo.parallel.kept_cause import PEER_LOST_WAIT_S, is_peer_lost, read_cause
from grpo.parallel.ranks import Ranks, current_ranks

__all__ = [
    "ChildFailedError",
    "Nodes",
    "RankError",
    "SignalException",
    "failure_cause",
    "failure_message",
    "init_rank",
    "is_launched",
    "is_peer_failure",
    "is_rank_failure_record",
    "keep_failure_report",
    "launch_ranks",
    "quiet_failure_logs",
    "worded_rank",
]


class RankError(RuntimeError):
    """What a rank raises with a message worded for the user; failure_message reads it back
    from the launcher's error file."""


@dataclass(frozen=True)
class Nodes:
    """The machines a launch spans: `count` nodes meeting at `endpoint` (host:port that every
    node reaches; `localhost:0`, a free port here, for one). Without `rank` they meet in
    torch's c10d rendezvous, which numbers the nodes itself (`grpo train --nnodes`); with
    it (the service, whose gang in the store numbered them: app/store/nodes.py) node
    `rank` of a static rendezvous (torchrun's `--node-rank`), node 0 serving its store at
    `endpoint`, so node 0 holds global rank 0."""

    count: int = 1
    endpoint: str = "localhost:0"
    rank: int | None = None
    join_seconds: int | None = None
    """With `rank`: how long node 0's rendezvous store waits for every other node to join,
    and another node keeps trying to reach it (torch's static rendezvous: 600 s unset)."""


def launch_ranks(
    entry: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    num_processes: int,
    run_id: str,
    nodes: Nodes | None = None,
    log_dir: Path | None = None,
    start_method: Literal["spawn", "forkserver"] = "spawn",
) -> Any:
    """Run `entry(*args)` in `num_processes` ranks on this machine; the return value of the
    lowest rank here (rank 0 on the node that got it).

    `entry` must be a module-level function (the ranks are spawned, or forked from
    multiprocessing's fork server: `start_method`, worker/preload.py) that calls init_rank
    first. Raises ChildFailedError when any rank fails. Over several machines
    (`nodes`), each node calls this with the same `run_id` and endpoint (host:port of one
    of them) that all reach, as `torchrun --nnodes --rdzv-endpoint` does. `log_dir`:
    where the launcher keeps each rank's error file (default a fresh temporary folder).
    """
    nodes = nodes or Nodes()
    config = LaunchConfig(
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir)) if log_dir else None,
        min_nodes=nodes.count,
        max_nodes=nodes.count,
        nproc_per_node=num_processes,
        run_id=run_id,
        rdzv_backend="c10d" if nodes.rank is None else "static",
        rdzv_endpoint=nodes.endpoint,
        rdzv_configs=_rendezvous_configs(nodes),
        max_restarts=0,
        monitor_interval=0.5,
        start_method=start_method,
    )
    returned = elastic_launch(config, entry)(*args)  # {global rank: value} of this node's ranks
    return returned[min(returned)]


def _rendezvous_configs(nodes: Nodes) -> dict[str, Any]:
    if nodes.rank is None:
        return {}
    joined = {} if nodes.join_seconds is None else {"timeout": nodes.join_seconds}
    return {"rank": nodes.rank, **joined}


def is_launched() -> bool:
    """True in a process the launcher started (it sets the rank's environment)."""
    return "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ


def failure_message(exc: ChildFailedError, *, num_processes: int) -> str:
    """One line naming the rank whose failure caused the others and how: the signal that
    killed it, its RankError's message or its exception."""
    rank, failure = root_failure(exc)
    who = f"rank {rank} of {num_processes} (pid {failure.pid})"
    text = _error_text(failure)
    if failure.exitcode < 0:
        what = f"was killed by {failure.signal_name()}"
    elif text is not None and is_peer_lost(text) and (cause := _cause_on_file(failure)):
        # the launcher saw a collateral failure first; the cause's error file says more (its
        # folder is named by its local rank: on node n, rank = n's first rank + local rank)
        rank, text = rank - failure.local_rank + cause[0], cause[1]
        who = f"rank {rank} of {num_processes}"
        what = "failed: " + text.removeprefix(f"{RankError.__name__}: ")
    elif text is not None:
        what = "failed: " + text.removeprefix(f"{RankError.__name__}: ")
    else:  # it exited without an exception (no error file)
        what = f"exited with code {failure.exitcode}"
    return f"{who} {what}; every rank of the run was stopped"


def failure_cause(exc: ChildFailedError) -> Cause | None:
    """The cause (grpo/cause.py) kept by the rank failure_message names, read beside its
    error file (grpo/parallel/kept_cause.py); None when it kept none (killed by a signal,
    or dead before its entry ran)."""
    _, failure = root_failure(exc)
    text = _error_text(failure)
    if text is not None and is_peer_lost(text) and (cause := _cause_on_file(failure)):
        return read_cause(Path(failure.error_file).parent.parent / str(cause[0]) / "error.json")
    return read_cause(failure.error_file)


def root_failure(exc: ChildFailedError) -> tuple[int, Any]:
    """The failed rank that is a cause: one killed by a signal or failing on its own comes
    before one whose collective broke because a peer was gone (ties are common: the launcher
    stamps failures to the second), then the earliest, then the lowest rank."""

    def order(item: tuple[int, Any]) -> tuple[bool, int, int]:
        rank, failure = item
        return (is_peer_lost(_error_text(failure) or ""), failure.timestamp, rank)

    return min(exc.failures.items(), key=order)


def is_peer_failure(exc: ChildFailedError) -> bool:
    """Whether the ranks here failed only because a rank elsewhere was gone (their
    collective broke on its exit): on several machines, maybe a node that was lost."""
    return is_peer_lost(_error_text(root_failure(exc)[1]) or "")


def _error_text(failure: Any) -> str | None:
    """A failed rank's exception as the launcher's error file has it ("Type: text")."""
    message = failure.message
    return str(message.get("message")) if isinstance(message, dict) else None


def _cause_on_file(failure: Any) -> tuple[int, str] | None:
    """(local rank, exception) of a rank of the same launch whose error file names a failure
    of its own: the launcher stops polling at the first failed rank, which may be one whose
    collective broke on the cause's exit (error files sit in <attempt>/<local rank>/)."""
    for path in sorted(Path(failure.error_file).parent.parent.glob("*/error.json")):
        try:
            message = json.loads(path.read_text())["message"]
            text = str(message["message"] if isinstance(message, dict) else message)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if path.parent.name.isdigit() and not is_peer_lost(text):
            return int(path.parent.name), text
    return None


def keep_failure_report(exc: ChildFailedError, log_dir: Path) -> Path:
    """Write the launcher's whole report (each failed rank's exit code, error file and
    traceback) into `log_dir`, beside the ranks' error files; its path. One file per failed
    launch and node, so a resumed run's report or another node's (a workdir on shared
    storage) does not overwrite this one."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = log_dir / f"failure-{stamp}-{socket.gethostname()}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{exc}\n{_cause_report(exc)}")
    return path


def _cause_report(exc: ChildFailedError) -> str:
    """The error file of the rank that caused the failure, when the launcher's report names
    only a rank whose collective broke on its exit (the launcher stops at the first failed
    rank it polls): its exception and traceback, so the kept report holds the cause."""
    _, failure = root_failure(exc)
    text = _error_text(failure)
    if text is None or not is_peer_lost(text) or not (cause := _cause_on_file(failure)):
        return ""
    error_file = Path(failure.error_file).parent.parent / str(cause[0]) / "error.json"
    try:
        message = json.loads(error_file.read_text())["message"]
    except (OSError, ValueError, KeyError):
        return ""
    extra = message.get("extraInfo", {}) if isinstance(message, dict) else {}
    trace = extra.get("py_callstack", "")
    return (
        f"The rank above failed because local rank {cause[0]} of this launch had failed first "
        f"(its error file: {error_file}):\n{cause[1]}\n{trace}\n"
    )


class _NoRankFailureRecords(logging.Filter):
    """Drops the launcher's own log of a rank's failure (its traceback, the SIGTERM sent to
    the other ranks): where a failure is said in one line and its report kept in a file,
    they only bury that line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not is_rank_failure_record(record)


def is_rank_failure_record(record: logging.LogRecord) -> bool:
    """Whether `record` is the launcher's own report of a rank's failure (its traceback, the
    SIGTERM sent to the other ranks)."""
    return record.getMessage().startswith(("failed (exitcode", "Terminating process"))


def quiet_failure_logs() -> None:
    """In this process, from now on, the launcher no longer logs a rank's failure itself."""
    for name in ("torch.distributed.elastic.multiprocessing.api", "torch.multiprocessing.spawn"):
        logging.getLogger(name).addFilter(_NoRankFailureRecords())


def uses_cuda(device: str) -> bool:
    """Whether the ranks of a run on `device` take one GPU each (NCCL) rather than the CPU."""
    return device != "cpu" and torch.cuda.is_available()


def init_rank(device: str) -> Ranks:
    """In a launched rank: join the run's process group, NCCL with one GPU per rank on
    CUDA, gloo with one torch thread per rank on CPU (ranks share the cores).

    On CUDA the group has both backends: NCCL for CUDA tensors (gradients, FSDP's
    collectives) and gloo for CPU ones (the step's counts and metric sums are float64 CPU
    tensors, which NCCL cannot reduce)."""
    is_cuda = uses_cuda(device)
    if is_cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    else:
        torch.set_num_threads(1)
    dist.init_process_group("cpu:gloo,cuda:nccl" if is_cuda else "gloo")
    return current_ranks()


@contextmanager
def worded_rank(device: str) -> Iterator[Ranks]:
    """A launched rank's life in the run: join the group (init_rank), run the body, leave.
    What the body (or joining) raises comes out as RankError worded as a one-process
    run's failure, raised before leaving the group: the launcher's error file says why
    before the other ranks' collectives break on this rank's exit (failure_message reads
    it back). A failure that is only another rank's end (a collective that lost its peer)
    waits PEER_LOST_WAIT_S first, so that the launcher, polling every 0.5 s, finds the
    rank that is gone before this one: killed by a signal, that rank leaves no error file,
    and only the launcher can name it. Every launched rank lives in here: the service's
    (worker/ranks.py) and `grpo train`'s (grpo/cli/train.py)."""
    try:
        yield init_rank(device)
    except Exception as exc:
        if is_peer_lost(f"{type(exc).__name__}: {exc}"):
            time.sleep(PEER_LOST_WAIT_S)
        raise RankError(user_message(exc)) from exc
    leave_group()


def leave_group() -> None:
    """Destroy the process group, if this process joined one, and let go of what still
    holds it, so that its threads end here and not in the interpreter's shutdown.

    destroy_process_group only drops torch's own references: FSDP's device mesh holds the
    group too, through the sharded weights (freed with the model, whose FSDP state is a
    reference cycle: gc) and through DTensor's sharding-propagation caches (cleared here).
    A group still held is destroyed while Python clears its modules at exit, its gloo
    threads running until then; a rank could die there of SIGABRT, "terminate called
    without an active exception" (pytorch issue 65231), after a run that succeeded."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        _clear_sharding_prop_cache()  # type: ignore[no-untyped-call]
        gc.collect()
