"""One run, wired the same way from every door: the spec (what to train), its environment
(where: grpo/run/environment.py) and its sinks (who hears of it: grpo/run/sink.py). The
worker, `grpo train` and the Python API each build a Run and call `fit`; the trackers of
`logging.report_to` join the door's sinks here, on rank 0, so every door has them.

Each hook of the training loop calls every sink in the order given (the worker's store
first: a tracker hears only of what was written under the lease); the trackers come last.
Every sink is closed with the attempt's outcome, whatever ends it. Knows nothing of HTTP,
SQL or Celery.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from grpo.checkpoints.files import latest_checkpoint
from grpo.report import EvalReport, SavedCheckpoint, StepReport
from grpo.report.trackers import Outcome
from grpo.run.environment import RunEnvironment
from grpo.run.preflight import preflight_rewards
from grpo.run.sink import Sink
from grpo.run.trackers import TrackerSink
from grpo.spec import JobSpec
from grpo.spec.logging import missing_trackers
from grpo.training.trainer import FitResult, TrainingLoop

log = logging.getLogger(__name__)


class Run:
    def __init__(self, spec: JobSpec, env: RunEnvironment, sinks: Sequence[Sink] = ()) -> None:
        self.spec, self.env = spec, env
        self.sinks = list(sinks)

    def fit(self, *, resume: bool = True) -> FitResult:
        """Build the training loop and train to spec.max_steps (from the latest checkpoint
        with `resume`); ValueError before anything loads when a tracker cannot be opened."""
        missing = missing_trackers(self.spec.logging.report_to)
        if missing:
            raise ValueError(f"logging.report_to: {missing[0]}")
        loop = self.build()
        outcome: Outcome = "failed"
        try:
            if loop.ranks.is_main and self.spec.logging.report_to:
                self.sinks.append(TrackerSink(self.spec, self.env))
            for sink in self.sinks:
                sink.open()
            if loop.ranks.is_main and not (resume and latest_checkpoint(loop.workdir)):
                self.preflight(loop)  # once a run: a resumed attempt found what it finds
            result = loop.fit(
                self.log_step,
                should_stop=lambda: self.stop_reason() is not None,
                resume=resume,
                fence=self.fence,
                on_checkpoint=self.log_checkpoint,
                on_eval=self.log_eval,
            )
            outcome = self.outcome_of(result)
            return result
        except BaseException as exc:
            if any(isinstance(exc, sink.hands_back) for sink in self.sinks):
                outcome = "handed_back"
            raise
        finally:
            self.close(outcome)

    def build(self) -> TrainingLoop:
        env = self.env
        return TrainingLoop(
            self.spec,
            workdir=env.workdir,
            cache_dir=env.cache_dir,
            log=self.add_log,
            progress=env.progress,
            run_id=env.run_id,
            reach=env.reach,
        )

    def preflight(self, loop: TrainingLoop) -> None:
        """The rewards probed before the first step (grpo/run/preflight.py), told to every
        sink."""
        report = preflight_rewards(self.spec, loop.rewarder, loop.examples, log=self.add_log)
        if report is not None:
            for sink in self.sinks:
                sink.log_preflight(report)

    def add_log(self, level: str, message: str) -> None:
        for sink in self.sinks:
            sink.add_log(level, message)

    def log_step(self, report: StepReport) -> None:
        for sink in self.sinks:
            sink.log_step(report)

    def log_eval(self, report: EvalReport) -> None:
        for sink in self.sinks:
            sink.log_eval(report)

    def log_checkpoint(self, saved: SavedCheckpoint) -> None:
        for sink in self.sinks:
            sink.log_checkpoint(saved)

    def fence(self) -> None:
        for sink in self.sinks:
            sink.fence()

    def stop_reason(self) -> Outcome | None:
        """The first sink's reason to stop (the next ones are not asked)."""
        for sink in self.sinks:
            reason = sink.stop_reason()
            if reason is not None:
                return reason
        return None

    def outcome_of(self, result: FitResult) -> Outcome:
        """Succeeded; or, stopped early, the reason the sinks give now, a cancel first (a
        stop no sink here asked for came from another rank's Ctrl-C: cancelled)."""
        if not result.is_stopped:
            return "succeeded"
        reasons = [sink.stop_reason() for sink in self.sinks]
        if "cancelled" in reasons:
            return "cancelled"
        return next((r for r in reasons if r is not None), "cancelled")

    def close(self, outcome: Outcome) -> None:
        """A sink that cannot be closed (a tracker's server is down) does not change how the
        run ended, nor keep the others open: said in this process's log."""
        for sink in self.sinks:
            try:
                sink.close(outcome)
            except Exception:  # noqa: BLE001 - any sink's error
                name = self.env.run_id or self.env.workdir.name
                log.exception("run %s: closing %s (%s) failed", name, type(sink).__name__, outcome)
