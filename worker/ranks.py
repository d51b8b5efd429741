"""A run's processes, one per rank (one for most runs): the worker starts them with torch's
elastic launcher (the API behind `torchrun`, grpo/parallel/launch.py) and supervises them;
rank 0 alone writes to the store.

Rank 0 trains under the worker's lease in its own process (its own database connections):
it writes every step (the whole step, gathered from every rank), log line, checkpoint and
evaluation, and checks for a cancel between steps; the trainer's collective stop takes
every rank out at the same step boundary. The other ranks never touch the store. The
worker process keeps the lease's heartbeat and writes the run's final status.

Stopping: the worker's own stop (SIGTERM, Ctrl-C) reaches rank 0 through an event and the
run is handed back at the next step boundary, as on one process; the ranks leave the
worker's process group, so a terminal's Ctrl-C reaches the worker only. Before rank 0 joined
the group (the ranks still import torch and meet) there is no step to wait for: the worker
ends the ranks at once and hands the run back. A rank that dies
(an error, the OOM killer, SIGKILL) makes the launcher stop the others and the run fails
naming the rank.
Every rank dies with the worker process, even one killed with SIGKILL (Linux's parent-death
signal), so no rank outlives its worker.

The launcher runs in a thread beside the worker's main thread, so it does not take over
the worker's SIGTERM/SIGINT handlers (Celery's stop, worker/lifecycle.py); it hands its
result or error back through a Future.

A failed run carries its cause (grpo/cause.py: the exception, the last frames): each rank
starts in worker/rank_entry.py, which keeps the cause beside its error file, and
RanksFailed carries the failed rank's. A rank that failed before it could import the run's
code (worker/rank_entry.py never set `loaded`) is no failure of the run: CodeNotLoaded says
the worker's environment broke under it (worker/environment.py).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import Future, wait
from dataclasses import replace
from multiprocessing.synchronize import Event as ProcessEvent
from typing import Any, Protocol

import torch

from app.settings import get_settings
from app.store.lease import Lease
from grpo.cause import Cause
from grpo.failures import StepFailure
from grpo.parallel.launch import (
    ChildFailedError,
    Nodes,
    RankError,
    failure_cause,
    failure_message,
    is_peer_failure,
    is_rank_failure_record,
    launch_ranks,
    root_failure,
    uses_cuda,
    worded_rank,
)
from grpo.parallel.threads import threads_for, user_threads
from grpo.spec import JobSpec
from grpo.training.trainer import FitResult
from worker import preload
from worker.address import rank_environment
from worker.device import Devices, held_devices
from worker.rank_entry import enter
from worker.run_writes import GaveUp
from worker.training import train, train_silently

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1


class RanksFailed(StepFailure):
    """A rank of the run died or raised; every rank was stopped. Worded for the user;
    `cause`: what the failed rank raised (None when it was killed by a signal)."""

    def __init__(self, message: str, *, cause: Cause | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class CodeNotLoaded(Exception):  # noqa: N818 - the worker's state, not the run's error
    """A rank exited before it imported the run's code (worker/rank_entry.py): the worker's
    environment broke under it, and the run, which never started, is not at fault. Worded
    for the worker's log and the run's: what failed, and where."""


class StoppedStarting(Exception):  # noqa: N818 - a stop, not an error
    """The worker was told to stop while the ranks were still starting (importing, meeting,
    before rank 0 joined the group): they were ended at once, with no step in flight, and
    the run goes back to the queue as it was."""


class GaveUpOnDatabase(Exception):  # noqa: N818 - a stop, not an error
    """Rank 0 gave up on the database (it did not answer within GRPO_DB_OUTAGE_WAIT_SECONDS;
    worker/run_writes.py): the ranks have stopped, and the run goes back to the queue once
    the database answers, to resume from its last checkpoint (step 0 without one)."""


def ranks_label(spec: JobSpec, held: Devices) -> str:
    """Where the run's ranks train, as the run page shows it: '2 ranks · cpu (gloo)', or
    '4 ranks · cuda:0,1,2,3 (nccl)' with the ids of the worker's GPUs the ranks take."""
    n = spec.resources.num_processes
    if held.kind == "cuda" and uses_cuda(spec.device):
        return f"{n} ranks · cuda:{','.join(held.ids[:n])} (nccl)"
    return f"{n} ranks · cpu (gloo)"


class GangBroke(Exception):  # noqa: N818 - a lost machine, not the run's error
    """A node of the run on several machines was lost (its worker died, or was cut off from
    the store): every rank here was stopped, and the run goes back to the queue. Worded for
    the run's log: which node, and why."""


class GangNode(Protocol):
    """This worker's node of a run on several machines (worker/gang.py's Gang)."""

    nodes: Nodes

    def broken(self) -> str | None:
        """Which node was lost and why, once one was; None while the gang is whole."""


leading: dict[str, GangNode] = {}
"""The node of the run on several machines whose node 0 this worker holds (set by
worker/gang.py while it trains): its ranks launch as that node."""


def train_on_ranks(
    held: Lease, spec: JobSpec, *, stopping: threading.Event, gang: GangNode | None = None
) -> FitResult:
    """Launch the run's ranks and wait for them; rank 0's result. RanksFailed when one dies,
    StoppedStarting when the worker is stopped before rank 0 joined the group,
    GaveUpOnDatabase when rank 0 gave up on the database, GangBroke when a node of the
    run was lost (its ranks here are killed at once). `gang`: this worker's node of a run
    on several machines (default: the one `leading` names, else this machine only)."""
    gang = gang or leading.get(held.run_id)
    nodes = Nodes() if gang is None else replace(gang.nodes, join_seconds=_join_seconds())
    environ = rank_environment(get_settings().worker_address) if nodes.count > 1 else {}
    spawn = multiprocessing.get_context("spawn")
    stop, started, gave_up, loaded = spawn.Event(), spawn.Event(), spawn.Event(), spawn.Event()
    ranks = spec.resources.num_processes
    held_here = held_devices()
    threads = threads_for(held_here.kind, held_here.count, ranks=ranks)
    others = {child.pid for child in multiprocessing.active_children()}
    worker = os.getpid()
    start_method = preload.start_method()
    launched: Future[FitResult] = Future()

    def launch() -> None:
        try:
            launched.set_result(
                launch_ranks(
                    enter,  # imports rank_main by name, under its guard (worker/rank_entry.py)
                    (
                        loaded,
                        RANK_MAIN,
                        held.run_id,
                        held.token,
                        spec.model_dump(mode="json"),
                        stop,
                        started,
                        gave_up,
                        worker,
                        threads,
                        environ,
                    ),
                    num_processes=ranks,
                    run_id=held.run_id,
                    nodes=nodes,
                    log_dir=get_settings().runs_dir / held.run_id / "ranks",
                    start_method=start_method,
                )
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            launched.set_exception(exc)

    how = "forked with the run's code preloaded" if start_method == "forkserver" else "spawned"
    log.info("run %s: launching %d rank%s (%s)", held.run_id, ranks, "s" * (ranks > 1), how)
    launcher = threading.Thread(target=launch, name=f"ranks-{held.run_id}")
    launcher.start()
    broke: str | None = None
    while not launched.done():
        wait([launched], timeout=0.5)  # the main thread stays free for the worker's signals
        if stopping.is_set():
            stop.set()
            if not started.is_set():
                _ENDING_STARTING_RANKS.set()
                _end_starting_ranks(others)
        if gang is not None and broke is None and (broke := gang.broken()) is not None:
            # no step boundary to wait for: the ranks may hang in a collective with the
            # lost node's (gloo's own timeout is minutes)
            log.warning("run %s: %s; stopping this node's ranks", held.run_id, broke)
            _ENDING_STARTING_RANKS.set()
        if broke is not None:  # and those the launcher starts later: still meeting the lost
            # node, it ends within its rendezvous's wait (_join_seconds)
            _end_starting_ranks(others)
    launcher.join()
    error = launched.exception()
    if gang is not None and broke is None and error is not None:
        broke = _broken_within(gang, error)
    _ENDING_STARTING_RANKS.clear()
    if broke is not None:
        stopped = (
            "every node's ranks were stopped" if started.is_set() else "before any rank started"
        )
        raise GangBroke(f"{broke}; {stopped}") from error
    if stopping.is_set() and not started.is_set():
        # ended here, or by the terminal's Ctrl-C, which reaches ranks not yet in a group
        # of their own: either way a stop, with no step to lose
        raise StoppedStarting("handed the run back to the queue before its ranks started")
    if gave_up.is_set():  # the ranks have stopped (the launcher stopped those of several)
        raise GaveUpOnDatabase(
            f"the database did not answer for {get_settings().db_outage_wait_seconds:g} s "
            "(GRPO_DB_OUTAGE_WAIT_SECONDS)"
        ) from error
    if isinstance(error, ChildFailedError):
        cause = failure_cause(error)
        if not loaded.is_set() and root_failure(error)[1].exitcode > 0:
            raise CodeNotLoaded(not_loaded(error, cause)) from error
        if ranks * nodes.count == 1:
            raise RanksFailed(one_process_failure(error), cause=cause) from error
        message = failure_message(error, num_processes=ranks * nodes.count)
        raise RanksFailed(message, cause=cause) from error
    return launched.result()  # or the launcher's other error, raised here


def _join_seconds() -> int:
    """How long the launchers of a run on several machines wait for each other at the
    rendezvous: GRPO_GANG_FORMATION_SECONDS. Every node passed its check moments before
    (worker/gang_check.py), so they meet at once unless one is lost, which its claim's
    heartbeat tells sooner; this bounds the launcher's own wait, torch's 600 s otherwise."""
    return max(1, round(get_settings().gang_formation_seconds))


def _broken_within(gang: GangNode, error: BaseException) -> str | None:
    """Why the gang broke, when the ranks here failed only because a rank on another node
    was gone: that node's claim expires within GRPO_STALE_AFTER_SECONDS when its worker
    died or was cut off. None when no node was lost by then (it ended its part itself,
    with an error of its own, or the failure is this node's)."""
    if not isinstance(error, ChildFailedError) or not is_peer_failure(error):
        return None
    settings = get_settings()
    deadline = time.monotonic() + settings.stale_after_seconds + 2 * settings.heartbeat_seconds
    while (why := gang.broken()) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    return why


def not_loaded(exc: ChildFailedError, cause: Cause | None) -> str:
    """Why the run's process never loaded the run's code: the import's error and where it
    was raised, or (dead before worker/rank_entry.py ran) its exit code."""
    if cause is not None:
        where = f" ({cause.where()})" if cause.frames else ""
        raised = f"{cause.type}: {cause.message}{where}"
        return f"the run's process could not import the run's code: {raised}"
    code = root_failure(exc)[1].exitcode
    return (
        f"the run's process exited with code {code} before it loaded the run's code (its "
        "traceback is in this worker's log)"
    )


def _end_starting_ranks(others: set[int | None]) -> None:
    """SIGKILL the ranks the launcher spawned (this process's multiprocessing children but
    `others`, those it had before): still importing or meeting, they have nothing to save,
    and waiting for them to reach a step boundary could outlast the worker's stop grace."""
    for child in multiprocessing.active_children():
        if child.pid not in others:
            child.kill()


def one_process_failure(exc: ChildFailedError) -> str:
    """A one-rank run's failure as the worker words a failed run: the error the run raised
    as it is, or the signal that killed its process."""
    _, failure = root_failure(exc)
    if failure.exitcode < 0:
        return (
            f"the run's process was killed by {failure.signal_name()} (a crash in native "
            "code, or the out-of-memory killer); the worker goes on with the next run"
        )
    message = failure.message
    text = str(message.get("message")) if isinstance(message, dict) else None
    if text is None:
        return f"the run's process exited with code {failure.exitcode}"
    return text.removeprefix(f"{RankError.__name__}: ")


def rank_main(
    run_id: str,
    token: int,
    spec_json: dict[str, Any],
    stop: ProcessEvent,
    started: ProcessEvent,
    gave_up: ProcessEvent,
    worker: int,
    threads: int,
    environ: dict[str, str],
) -> Any:
    """One rank, in the process the launcher spawned, under the worker's lease (`run_id`,
    `token`: plain values, so that the process imports nothing before worker/rank_entry.py
    guards it); `threads`: its torch threads, unless the user set OMP_NUM_THREADS
    (grpo/parallel/threads.py). `gave_up`: set by rank 0 when the run gave up on the
    database (worker/run_writes.py). `environ`: set before the rank joins its group (the
    network interface of a run on several machines: worker/address.py)."""
    os.environ.update(environ)
    held = Lease(run_id, token)
    _die_with(worker)
    os.setpgid(0, 0)  # out of the terminal's job: its Ctrl-C (or a group's SIGTERM) is the
    # worker's to act on, by stopping every rank at a step boundary
    spec = JobSpec.model_validate(spec_json)
    with worded_rank(spec.device) as ranks:
        if user_threads() is None:
            torch.set_num_threads(threads)  # init_rank gave a CPU rank one
        if ranks.is_main:
            # from now on a stop waits for a step boundary; the other ranks are past their
            # setpgid too (the group's gloo part, on CUDA too, is made by all ranks at once)
            started.set()
            try:
                return train(held, spec, should_stop=stop.is_set)
            except GaveUp:
                gave_up.set()
                if ranks.is_distributed:
                    raise  # the launcher stops the other ranks
                return None  # alone: no failure for the launcher to report
        return train_silently(held.run_id, spec)


RANK_MAIN = f"{__name__}:{rank_main.__name__}"
"""What worker/rank_entry.py imports and runs in each rank."""


def _die_with(worker: int) -> None:
    """SIGKILL this rank when its parent dies, however it dies (Linux): the worker, or the
    fork server it was forked from (worker/preload.py), which exits with the worker once
    this rank let go of its lifeline."""
    preload.leave_server()
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != worker and not _alive(worker):  # it died before the line above
        os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_ENDING_STARTING_RANKS = threading.Event()
"""Set while the worker SIGKILLs ranks it started, on its stop, before they began (its one
run at a time): the launcher's report of their deaths is no failure."""


class _NoChildThreadWarning(logging.Filter):
    """The launcher warns that, started from a thread, it cannot forward signals to the
    ranks; here the ranks die with the worker instead (_die_with), so the warning misleads.
    Nor does it report, with a traceback, the ranks the worker ended on purpose while they
    started (its own log says it handed the run back)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _ENDING_STARTING_RANKS.is_set() and is_rank_failure_record(record):
            return False
        return "running on a child thread" not in record.getMessage()


logging.getLogger("torch.distributed.elastic.multiprocessing.api").addFilter(
    _NoChildThreadWarning()
)
