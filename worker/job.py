"""One training job: claim the run, train it with grpo.Trainer, sink every step to the store.

A duplicate delivery of a run that is not queued does nothing. A run this worker cannot
fit (its device or free memory) goes back to its queue for another worker. Errors become a
failed run with a message a user understands; the worker process goes on to the next job.
"""

from __future__ import annotations

import logging
import time
from functools import partial

from app.settings import get_settings
from app.store import events, runs, steps
from grpo.sources import LocalRoots
from grpo.spec import JobSpec
from grpo.trainer import Trainer
from worker.celery_app import enqueue_run
from worker.device import device_label, fit_problem
from worker.errors import describe_error
from worker.lifecycle import current_run, worker_name

log = logging.getLogger(__name__)
_declined: set[str] = set()


def run_job(run_id: str) -> None:
    settings = get_settings()
    queued = runs.get_run(run_id)
    if queued is not None and queued.status == "queued":
        problem = _fit_problem(queued.spec)
        if problem:
            _decline(run_id, problem, queue=queued.queue)
            return
    run = runs.claim_run(run_id, worker=worker_name(), device=device_label())
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return
    current_run["id"] = run_id  # the housekeeping loop beats its heartbeat from now on
    try:
        trainer = Trainer(
            JobSpec.model_validate(run.spec),
            workdir=settings.runs_dir / run_id,
            cache_dir=settings.resolved_cache_dir,
            datasets_dir=settings.datasets_dir,
            model_roots=LocalRoots(settings.local_path_base, tuple(settings.model_root_list)),
            data_roots=LocalRoots(settings.local_path_base, tuple(settings.data_root_list)),
            log=partial(events.add_log, run_id),
            run_id=run_id,
            reward_hosts=settings.reward_host_list,
        )
        result = trainer.fit(
            partial(steps.save_step, run_id),
            should_stop=partial(runs.is_cancel_requested, run_id),
        )
        runs.finish_run(run_id, status="cancelled" if result.is_stopped else "succeeded")
    except Exception as exc:  # noqa: BLE001 - every failure must end as a failed run
        message = describe_error(exc)
        log.exception("run %s failed", run_id)
        events.add_log(run_id, "error", message)
        runs.finish_run(run_id, status="failed", error=message)
    finally:
        current_run["id"] = None


def _fit_problem(spec: dict[str, object]) -> str | None:
    try:
        return fit_problem(JobSpec.model_validate(spec))
    except ValueError:
        return None  # an invalid spec is claimed and failed with its message below


def _decline(run_id: str, problem: str, *, queue: str) -> None:
    """Leave the run queued for a worker that fits it; say so once per worker and run."""
    if run_id not in _declined:
        _declined.add(run_id)
        events.add_log(run_id, "warning", f"worker {worker_name()} left this run queued: {problem}")
    log.info("run %s does not fit this worker: %s", run_id, problem)
    # the pause keeps a lone unfit worker from spinning on the same message
    time.sleep(get_settings().decline_pause_seconds)
    enqueue_run(run_id, queue=queue)
