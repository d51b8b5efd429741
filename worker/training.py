"""The trainer of a run, wired to the store: every step, log line, checkpoint and evaluation
is written under the worker's lease, and a cancel or a stop ends the run at a step boundary.
Each write waits out a database outage; a run that gave up on the database stops, to be
handed back (worker/run_writes.py).

It runs in rank 0's process, which the worker starts for the run (worker/ranks.py; one
process for most runs); the other ranks of a run on several are given no lease and write
nothing to the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from app.settings import get_settings
from app.store import checkpoints, evals
from app.store.lease import Lease, LeaseLost
from grpo.report.trackers import Outcome, Trackers
from grpo.spec import JobSpec
from grpo.spec.sources import LocalRoots
from grpo.trainer import FitResult, Trainer
from worker.diagnosis import RunDoctor
from worker.run_writes import GaveUp, RunWrites

T = TypeVar("T")
log = logging.getLogger(__name__)


def train(held: Lease, spec: JobSpec, *, should_stop: Callable[[], bool]) -> FitResult:
    """Train the run this worker holds; `should_stop`: the worker was told to stop. Its
    trackers are closed with the run's outcome before the worker ends the run in the store:
    who sees it ended there finds its tracker runs ended too."""
    writes = RunWrites(held)
    trainer = build_trainer(spec, held.run_id, log=writes.add_log)
    settings = get_settings()
    trackers = Trackers(
        spec, settings.runs_dir / held.run_id, run_name=held.run_id, mlflow_uri=settings.mlflow_uri
    )
    outcome: Outcome = "failed"  # the worker fails the run in the store
    doctor = RunDoctor(spec, writes)
    try:
        result = trainer.fit(
            both(doctor.save_step, trackers.log_step),
            should_stop=lambda: writes.check() or should_stop(),
            fence=writes.check,
            on_checkpoint=lambda saved: writes.call(checkpoints.record_checkpoint, held, saved),
            on_eval=both(
                lambda report: writes.call(evals.save_eval, held.run_id, report, lease=held),
                trackers.log_eval,
            ),
        )
        outcome = outcome_of(result, is_cancel_asked=writes.check)
        return result
    except (LeaseLost, GaveUp):
        outcome = "handed_back"  # to its new owner, or by the worker once the database answers
        raise
    finally:
        _close(trackers, outcome, held.run_id)


def outcome_of(result: FitResult, *, is_cancel_asked: Callable[[], bool]) -> Outcome:
    """Succeeded, cancelled, or (the worker is stopping) to be handed back to the queue;
    `is_cancel_asked`: the lease check."""
    if not result.is_stopped:
        return "succeeded"
    if is_cancel_asked():  # a cancel wins over a stop
        return "cancelled"
    return "handed_back"


def _close(trackers: Trackers, outcome: Outcome, run_id: str) -> None:
    """A tracker that cannot be closed (its server is down) does not change how the run
    ended: the store is the source of truth. Said in the worker's log (the run may be
    another worker's by now)."""
    try:
        trackers.close(outcome)
    except Exception:  # noqa: BLE001 - any tracker's error
        log.exception("run %s: closing its trackers (%s) failed", run_id, outcome)


def train_silently(run_id: str, spec: JobSpec) -> FitResult:
    """A rank other than 0: the same training, nothing written to the store (rank 0 reports
    the whole step; a stop reaches this rank through the trainer's own collective)."""
    return build_trainer(spec, run_id).fit(lambda report: None)


def build_trainer(
    spec: JobSpec, run_id: str, *, log: Callable[[str, str], None] | None = None
) -> Trainer:
    settings = get_settings()
    return Trainer(
        spec,
        workdir=settings.runs_dir / run_id,
        cache_dir=settings.resolved_cache_dir,
        datasets_dir=settings.datasets_dir,
        model_roots=LocalRoots(settings.local_path_base, tuple(settings.model_root_list)),
        data_roots=LocalRoots(settings.local_path_base, tuple(settings.data_root_list)),
        run_id=run_id,
        reward_hosts=settings.reward_host_list,
        token_envs=settings.reward_token_env_list,
        tool_hosts=settings.tool_host_list,
        plugin_dirs=settings.plugin_dir_list,
        log=log,
    )


def both(store: Callable[[T], object], track: Callable[[T], None]) -> Callable[[T], None]:
    """The store first: a tracker only hears of what was written under the lease."""

    def call(report: T) -> None:
        store(report)
        track(report)

    return call
