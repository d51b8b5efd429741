"""One training job: claim the run, train it (grpo/run/run.py), sink every step to the store.

A duplicate delivery of a run that is not queued does nothing. A run this worker cannot
fit (more ranks than the devices it holds, its device or free memory) goes back to its
queue for another worker. Every write for the run is conditional on the lease the claim
returned: a worker that finds it lost the run (it stalled, the run was requeued and
claimed by another) stops at once, writes nothing more and says why in its own log. A
worker that is told to stop hands the run back to the queue at the next step boundary,
with a checkpoint. Errors become a failed run with a message a user understands and its
cause (the exception, the last frames of its traceback, secrets scrubbed: grpo/cause.py)
on the run and in its log; the worker process goes on to the next job. A worker whose
Python environment changed under it (worker/environment.py) hands the run back instead,
never failing it, and declines every run after until it is restarted. A database outage
is waited out: by the run's writes up to GRPO_DB_OUTAGE_WAIT_SECONDS (past it the run is
handed back to the queue, worker/run_writes.py), by the writes that end the run (its
status, a hand-back) for as long as it lasts. A run on several ranks is launched and
supervised by worker/ranks.py; its steps are written as worker/training.py writes a
one-process run's.

Every run trains in processes of its own, one per rank (one for most runs), started for it
and gone when it ends: reward and tool plugins installed after the worker started are found,
the run's memory and CUDA context are returned, and a crash in the run (a segfault in a
native extension, the out-of-memory killer) fails that run while the worker takes the next.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial

from app.queue import dispatch_run
from app.settings import get_settings
from app.store import db, events, lease, runs, waiting
from app.store.db import Session
from app.store.lease import Lease, LeaseLost
from app.store.models import Run, RunStatus
from grpo.cause import Cause, cause_of
from grpo.engines.kind import EngineServerFacts
from grpo.engines.registry import available_engines, check_engine
from grpo.failures import user_message
from grpo.scrub import scrub
from grpo.spec import JobSpec
from grpo.training.trainer import FitResult
from worker import environment, gang
from worker.db_outage import OutageWait
from worker.device import device_label, fit_problem, held_devices
from worker.gang_check import check_as_leader
from worker.lifecycle import current_run, stopping, worker_name
from worker.placement import (
    CancelledWaiting,
    GenerationLost,
    generation_problem,
    is_server_lost,
    with_generation_server,
)
from worker.ranks import (
    CodeNotLoaded,
    GangBroke,
    GaveUpOnDatabase,
    RanksFailed,
    StoppedStarting,
    ranks_label,
    train_on_ranks,
)
from worker.shared_storage import NotShared
from worker.training import outcome_of

log = logging.getLogger(__name__)
until_answered = OutageWait(None)
"""The writes that end a run (its status, a hand-back) wait out an outage however long: the
run's processes are gone, and this worker can claim nothing before the database answers."""
DECLINES_REMEMBERED = 1024
"""Runs a worker remembers having declined (oldest forgotten first): a long-lived worker
that sees many unfit runs must not grow without bound; a forgotten one is logged again."""
_declined: dict[str, None] = {}  # insertion-ordered: the first key is the oldest


def run_job(run_id: str) -> None:
    queued = db.call(runs.get_run, run_id)
    if stopping.is_set() and queued is not None:
        # taken between its own run's hand-back and the exit: leave it to the next worker
        db.call(dispatch_run, run_id, queue=queued.queue)
        return
    if queued is not None and queued.status == RunStatus.QUEUED:
        problem = environment.problem() or _fit_problem(queued.spec) or generation_problem(queued)
        if problem:
            _decline(run_id, problem, queue=queued.queue)
            return
        if gang.is_gang(queued) and not gang.take_node(
            queued, worker=worker_name(), stopping=stopping
        ):
            return  # no node of it here, or a node but 0, whose ranks trained here
    run = db.call(runs.claim_run, run_id, worker=worker_name(), device=_device(queued))
    if run is None:
        gang.leave_node(run_id)
        log.info("run %s is not queued; nothing to do", run_id)
        return
    held = Lease.of(run)
    current_run["lease"] = held  # the housekeeping loop beats its heartbeat from now on
    served: str | None = None  # the URL of the server a generation worker started
    try:
        spec = JobSpec.model_validate(run.spec)
        if run.needs_generation:  # on the server a generation worker starts for this claim
            spec = with_generation_server(held, spec, stopping=stopping)
            served = spec.vllm_server_base_url
        # a spec stored before GRPO_VLLM_SERVER_HOSTS changed: refused before any rank starts
        hosts = tuple(get_settings().vllm_server_host_list)
        check_engine(spec, EngineServerFacts(vllm_server_hosts=hosts))
        _train_on_ranks(held, spec, queue=run.queue)  # in fresh processes, even for one rank
    except LeaseLost as exc:
        log.warning("run %s: lost it, stopped without writing more: %s", run_id, exc)
    except CancelledWaiting:
        _finish(held, RunStatus.CANCELLED)
    except GangBroke as exc:  # a node of a run on several machines was lost
        _part_lost(held, str(exc), queue=run.queue, attempts=run.attempts)
    except NotShared as exc:  # its nodes do not see the same files: no retry mends that
        log.warning("run %s failed: %s", run_id, exc)
        _fail(held, scrub(str(exc)))
    except Exception as exc:  # noqa: BLE001 - every failure must end as a failed run
        if isinstance(exc, GenerationLost) or is_server_lost(exc, served):
            _generation_lost(held, exc, queue=run.queue, attempts=run.attempts)
            return
        log.exception("run %s failed", run_id)
        _fail(held, scrub(user_message(exc)), cause=_cause(exc))
    finally:
        current_run["lease"] = None
        gang.leave_node(run_id)  # node 0 of a run on several machines


def _fail(held: Lease, error: str, *, cause: Cause | None = None) -> None:
    """End the run as failed with `error`; a lease lost meanwhile leaves it to the new owner."""
    try:
        _finish(held, RunStatus.FAILED, error=error, cause=cause)
    except LeaseLost as lost:
        log.warning("run %s: lost it, its failure is not recorded: %s", held.run_id, lost)


def _generation_lost(held: Lease, exc: Exception, *, queue: str, attempts: int) -> None:
    """The run's generation server never answered or was lost: back to the queue (one line
    in this worker's log and the run's), where its next claim gets a new server; failed
    once its claims (`attempts`) pass GRPO_MAX_RETRIES, as a run whose worker keeps dying."""
    why = scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if not isinstance(exc, GenerationLost):
        why = f"its generation server is lost: {why}"
    _part_lost(held, why, queue=queue, attempts=attempts)


def _part_lost(held: Lease, why: str, *, queue: str, attempts: int) -> None:
    """A part of the run beyond this worker's ranks was lost (`why`: its generation server,
    a node of a run on several machines): back to the queue with one line saying it,
    resumed from its last checkpoint; failed once its claims (`attempts`) pass
    GRPO_MAX_RETRIES, as a run whose worker keeps dying."""
    retries = get_settings().max_retries
    try:
        if attempts > retries:
            log.warning("run %s: %s; failed after %d retries", held.run_id, why, retries)
            _finish(held, RunStatus.FAILED, error=f"{why} (claimed {attempts} times; gave up "
                    f"after {retries} retries, GRPO_MAX_RETRIES)")  # fmt: skip
            return
        _hand_back(held, reason=f"worker {worker_name()} handed the run back: {why}",
                   queue=queue, say_where=True)  # fmt: skip
    except LeaseLost as lost:
        log.warning("run %s: lost it, its hand-back is not recorded: %s", held.run_id, lost)


def _cause(exc: Exception) -> Cause | None:
    """What the failed rank raised, or (a failure in this process) `exc`'s own cause; none
    for a rank killed by a signal, or when it cannot be made: the run fails all the same."""
    try:
        if isinstance(exc, RanksFailed):
            return exc.cause.scrubbed() if exc.cause else None
        return cause_of(exc)
    except Exception:  # noqa: BLE001 - a failed run must be recorded, with or without it
        log.exception("the cause of a failure could not be read")
        return None


def _train_on_ranks(held: Lease, spec: JobSpec, *, queue: str) -> None:
    try:
        check_as_leader(held, spec, stopping=stopping)  # a run on several machines' nodes
        result = train_on_ranks(held, spec, stopping=stopping)
    except (StoppedStarting, GaveUpOnDatabase, CodeNotLoaded) as stopped:
        if until_answered.call(lease.check, held):  # a cancel asked for meanwhile wins
            _finish(held, RunStatus.CANCELLED)
        elif isinstance(stopped, StoppedStarting):
            _hand_back(held, reason=f"worker {worker_name()} is stopping: {stopped}", queue=queue)
        elif isinstance(stopped, CodeNotLoaded):
            is_first_decline(held.run_id)  # the hand-back says why: no second line for it
            problem = environment.broken(scrub(str(stopped)))
            _hand_back(held, reason=f"worker {worker_name()} handed the run back: {problem}",
                       queue=queue)  # fmt: skip
        else:
            _hand_back(held, reason=f"worker {worker_name()} gave the run back: {stopped}",
                       queue=queue, say_where=True)  # fmt: skip
        return
    _end(held, result, queue=queue)


def _end(held: Lease, result: FitResult, *, queue: str) -> None:
    """Succeeded, cancelled, or (this worker is stopping) handed back to the queue."""
    outcome = outcome_of(result, is_cancel_asked=partial(until_answered.call, lease.check, held))
    if outcome == "succeeded":
        _finish(held, RunStatus.SUCCEEDED)
    elif outcome == "cancelled":
        _finish(held, RunStatus.CANCELLED)
    else:
        where = f"handed the run back to the queue at step {result.last_step} with a checkpoint"
        _hand_back(held, reason=f"worker {worker_name()} is stopping: {where}", queue=queue)


def _finish(
    held: Lease, status: RunStatus, *, error: str | None = None, cause: Cause | None = None
) -> None:
    """The run's final status, waiting out a database outage; a failure's `cause` is kept
    on the run and, as a traceback, in its log after the error."""
    kept = cause.as_dict() if cause else None
    trace = cause.as_text() if cause else None
    _leave(held, status, partial(lease.finish, status=status, error=error, cause=kept, trace=trace))


def _hand_back(held: Lease, *, reason: str, queue: str, say_where: bool = False) -> None:
    """Back to the queue for the next worker, waiting out a database outage; `say_where`:
    the run's log line says where it starts again (its last checkpoint's step, or 0)."""
    _leave(held, RunStatus.QUEUED, partial(lease.hand_back, reason=reason, say_where=say_where))
    log.warning("run %s: %s", held.run_id, reason)
    until_answered.call(dispatch_run, held.run_id, queue=queue)


def _leave(held: Lease, status: RunStatus, write: Callable[[Session, Lease], None]) -> None:
    """The write that leaves the run `status`, waiting out a database outage; a retry that
    finds its own earlier commit landed (its answer was lost) is done."""
    try:
        until_answered.call(write, held)
    except LeaseLost:
        if not until_answered.call(lease.is_left_as, held, status):
            raise


def _device(queued: Run | None) -> str:
    """This worker's device, or where a multi-rank run's ranks train."""
    try:
        spec = JobSpec.model_validate(queued.spec) if queued is not None else None
    except ValueError:
        spec = None  # failed with its message once claimed
    if spec is not None and spec.resources.num_processes > 1:
        return ranks_label(spec, held_devices())
    return device_label()


def _fit_problem(spec: dict[str, object]) -> str | None:
    try:
        parsed = JobSpec.model_validate(spec)
    except ValueError:
        return None  # an invalid spec is claimed and failed with its message below
    return fit_problem(parsed, held_devices(), engines=available_engines())


def is_first_decline(run_id: str) -> bool:
    """Whether this worker has not declined the run before (as far as it remembers)."""
    if run_id in _declined:
        return False
    _declined[run_id] = None
    if len(_declined) > DECLINES_REMEMBERED:
        del _declined[next(iter(_declined))]
    return True


def _decline(run_id: str, problem: str, *, queue: str) -> None:
    """Leave the run queued for a worker that fits it; say so once per worker and run, in
    its log and as what it waits for (unless its gang's wait says more: app/store/waiting.py)."""
    if is_first_decline(run_id):
        said = f"worker {worker_name()} left this run queued: {problem}"
        db.call(events.add_log, run_id, "warning", said)
        db.call(waiting.say_waiting, run_id, said)
        log.info("run %s left queued: %s", run_id, problem)
    else:
        log.debug("run %s left queued again", run_id)
    db.call(dispatch_run, run_id, queue=queue)
    # Busy for the pause after the send, not before it: a worker that fits polls the queue
    # meanwhile (the filesystem broker's consumers poll, and this one would poll first the
    # moment it is free), and a lone unfit worker does not spin on the same message.
    time.sleep(get_settings().decline_pause_seconds)
