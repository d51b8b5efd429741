"""One training job: claim the run, train it with grpo.Trainer, sink every step to the store.

A duplicate delivery of a run that is not queued does nothing. A run this worker cannot
fit (more ranks than the devices it holds, its device or free memory) goes back to its
queue for another worker. Every write for the run is conditional on the lease the claim
returned: a worker that finds it lost the run (it stalled, the run was requeued and
claimed by another) stops at once, writes nothing more and says why in its own log. A
worker that is told to stop hands the run back to the queue at the next step boundary,
with a checkpoint. Errors become a failed run with a message a user understands; the
worker process goes on to the next job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from app.queue import dispatch_run
from app.settings import get_settings
from app.store import checkpoints, db, evals, events, lease, runs, steps
from app.store.lease import Lease, LeaseLost
from app.store.models import RunStatus
from grpo.failures import user_message
from grpo.sources import LocalRoots
from grpo.spec import JobSpec
from grpo.trackers import Trackers
from grpo.trainer import FitResult, Trainer
from worker.device import device_label, fit_problem, held_devices
from worker.lifecycle import current_run, stopping, worker_name

T = TypeVar("T")

log = logging.getLogger(__name__)
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
        problem = _fit_problem(queued.spec)
        if problem:
            _decline(run_id, problem, queue=queued.queue)
            return
    run = db.call(runs.claim_run, run_id, worker=worker_name(), device=device_label())
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return
    held = Lease.of(run)
    current_run["lease"] = held  # the housekeeping loop beats its heartbeat from now on
    try:
        _end(held, _train(held, JobSpec.model_validate(run.spec)), queue=run.queue)
    except LeaseLost as exc:
        log.warning("run %s: lost it, stopped without writing more: %s", run_id, exc)
    except Exception as exc:  # noqa: BLE001 - every failure must end as a failed run
        log.exception("run %s failed", run_id)
        try:
            db.call(lease.finish, held, status=RunStatus.FAILED, error=user_message(exc))
        except LeaseLost as lost:
            log.warning("run %s: lost it, its failure is not recorded: %s", run_id, lost)
    finally:
        current_run["lease"] = None


def _train(held: Lease, spec: JobSpec) -> FitResult:
    settings = get_settings()
    trainer = Trainer(
        spec,
        workdir=settings.runs_dir / held.run_id,
        cache_dir=settings.resolved_cache_dir,
        datasets_dir=settings.datasets_dir,
        model_roots=LocalRoots(settings.local_path_base, tuple(settings.model_root_list)),
        data_roots=LocalRoots(settings.local_path_base, tuple(settings.data_root_list)),
        log=lambda level, message: db.call(lease.add_log, held, level, message),
        run_id=held.run_id,
        reward_hosts=settings.reward_host_list,
    )
    trackers = Trackers(
        spec, settings.runs_dir / held.run_id, run_name=held.run_id, mlflow_uri=settings.mlflow_uri
    )
    try:
        return trainer.fit(
            both(
                lambda report: db.call(steps.save_step, held.run_id, report, lease=held),
                trackers.log_step,
            ),
            should_stop=lambda: db.call(lease.check, held) or stopping.is_set(),
            fence=lambda: db.call(lease.check, held),
            on_checkpoint=lambda saved: db.call(checkpoints.record_checkpoint, held, saved),
            on_eval=both(
                lambda report: db.call(evals.save_eval, held.run_id, report, lease=held),
                trackers.log_eval,
            ),
        )
    finally:
        trackers.close()


def both(store: Callable[[T], None], track: Callable[[T], None]) -> Callable[[T], None]:
    """The store first: a tracker only hears of what was written under the lease."""

    def call(report: T) -> None:
        store(report)
        track(report)

    return call


def _end(held: Lease, result: FitResult, *, queue: str) -> None:
    """Succeeded, cancelled, or (this worker is stopping) handed back to the queue."""
    if not result.is_stopped:
        db.call(lease.finish, held, status=RunStatus.SUCCEEDED)
    elif db.call(lease.check, held):  # a cancel wins over a stop
        db.call(lease.finish, held, status=RunStatus.CANCELLED)
    else:
        db.call(
            lease.hand_back,
            held,
            reason=f"worker {worker_name()} is stopping: handed the run back to the queue at "
            f"step {result.last_step} with a checkpoint",
        )
        log.warning("run %s handed back to the queue at step %d", held.run_id, result.last_step)
        db.call(dispatch_run, held.run_id, queue=queue)


def _fit_problem(spec: dict[str, object]) -> str | None:
    try:
        return fit_problem(JobSpec.model_validate(spec), held_devices())
    except ValueError:
        return None  # an invalid spec is claimed and failed with its message below


def is_first_decline(run_id: str) -> bool:
    """Whether this worker has not declined the run before (as far as it remembers)."""
    if run_id in _declined:
        return False
    _declined[run_id] = None
    if len(_declined) > DECLINES_REMEMBERED:
        del _declined[next(iter(_declined))]
    return True


def _decline(run_id: str, problem: str, *, queue: str) -> None:
    """Leave the run queued for a worker that fits it; say so once per worker and run."""
    if is_first_decline(run_id):
        db.call(
            events.add_log,
            run_id,
            "warning",
            f"worker {worker_name()} left this run queued: {problem}",
        )
    log.info("run %s does not fit this worker: %s", run_id, problem)
    # the pause keeps a lone unfit worker from spinning on the same message
    time.sleep(get_settings().decline_pause_seconds)
    db.call(dispatch_run, run_id, queue=queue)
