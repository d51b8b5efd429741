"""The trackers of `logging.report_to` as a sink of the run (grpo/report/trackers.py writes
them), from every door: opened on rank 0, in the run's workdir, named by its run id (its
workdir's name outside the service)."""

from __future__ import annotations

from grpo.report import EvalReport, StepReport
from grpo.report.trackers import Outcome, Trackers
from grpo.run.environment import RunEnvironment
from grpo.run.sink import Sink
from grpo.spec import JobSpec


class TrackerSink(Sink):
    def __init__(self, spec: JobSpec, env: RunEnvironment) -> None:
        self.trackers = Trackers(
            spec, env.workdir, run_name=env.run_id or None, mlflow_uri=env.mlflow_uri
        )

    def log_step(self, report: StepReport) -> None:
        self.trackers.log_step(report)

    def log_eval(self, report: EvalReport) -> None:
        self.trackers.log_eval(report)

    def close(self, outcome: Outcome) -> None:
        self.trackers.close(outcome)
