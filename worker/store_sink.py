"""The store as a sink of the run (grpo/run/sink.py), with the run doctor: rank 0 writes
each step with its findings (and the reward preflight's, before the first), each log line,
checkpoint and evaluation under the worker's lease (worker/run_writes.py), and asks between
steps whether to stop: a cancel asked for in the store, or this worker stopping (the run
then goes back to the queue)."""

from __future__ import annotations

from collections.abc import Callable

from app.store import checkpoints, evals
from app.store.lease import Lease, LeaseLost
from grpo.report import EvalReport, SavedCheckpoint, StepReport
from grpo.report.trackers import Outcome
from grpo.rewards.trial_report import PreflightReport
from grpo.run.sink import Sink
from grpo.spec import JobSpec
from worker.run_doctor import RunDoctor
from worker.run_writes import GaveUp, RunWrites


class StoreSink(Sink):
    # the run goes on in a later attempt: its new owner's, or the next once the database answers
    hands_back = (LeaseLost, GaveUp)

    def __init__(self, held: Lease, spec: JobSpec, *, worker_stops: Callable[[], bool]) -> None:
        self.held = held
        self.writes = RunWrites(held)
        self.doctor = RunDoctor(spec, self.writes)
        self.worker_stops = worker_stops

    def add_log(self, level: str, message: str) -> None:
        self.writes.add_log(level, message)

    def log_preflight(self, report: PreflightReport) -> None:
        self.doctor.save_preflight(report)

    def log_step(self, report: StepReport) -> None:
        self.doctor.save_step(report)

    def log_eval(self, report: EvalReport) -> None:
        self.writes.call(evals.save_eval, self.held.run_id, report, lease=self.held)

    def log_checkpoint(self, saved: SavedCheckpoint) -> None:
        self.writes.call(checkpoints.record_checkpoint, self.held, saved)

    def fence(self) -> None:
        self.writes.check()  # LeaseLost once the run is another worker's

    def stop_reason(self) -> Outcome | None:
        """A cancel wins over this worker's stop."""
        if self.writes.check():
            return "cancelled"
        return "handed_back" if self.worker_stops() else None
