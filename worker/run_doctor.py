"""The run doctor in the worker: each step is diagnosed as it is written, in its transaction.

A run resumed from a checkpoint (or requeued) first replays its stored steps before the
first step this worker trains, so the findings are those of the whole run, as a fresh
diagnosis of the stored steps would find them (grpo/doctor/doctor.py `diagnose`). The
doctor sees each step's scalars as the store keeps them (7 significant digits), so the
two agree to the bit. A doctor that fails is switched off for the rest of the run: it
must never cost a run its steps. The reward preflight's findings (grpo/run/preflight.py),
made before the first step, are written beside them, once.
"""

from __future__ import annotations

import logging

from app.store import findings, steps
from app.store.lease import LeaseLost
from grpo.doctor import Doctor, Finding
from grpo.doctor.preflight import preflight_findings
from grpo.report import StepReport
from grpo.rewards.trial_report import PreflightReport
from grpo.spec import JobSpec
from worker.run_writes import GaveUp, RunWrites

log = logging.getLogger(__name__)


class RunDoctor:
    def __init__(self, spec: JobSpec, writes: RunWrites) -> None:
        """The doctor of the run `writes` writes (worker/training.py)."""
        self.spec, self.writes = spec, writes
        self.run_id = writes.held.run_id
        self.doctor: Doctor | None = None
        self.is_broken = False

    def observe(self, report: StepReport) -> tuple[list[Finding], bool]:
        """The findings to write with this step, and whether they are all of the run's."""
        metrics = steps.compact_scalars(report.scalars)
        if self.doctor is not None:
            return self.doctor.observe(report.step, metrics), False
        self.doctor = Doctor(self.spec)
        for row in self.writes.read(steps.list_metrics, self.run_id, limit=report.step):
            if row["step"] < report.step:
                self.doctor.observe(row["step"], row["metrics"])
        self.doctor.observe(report.step, metrics)
        return self.doctor.findings(), True

    def save_preflight(self, report: PreflightReport) -> None:
        """Write the reward preflight's findings (grpo/doctor/preflight.py); a failure to is
        said in the worker's log, never the run's end."""
        try:
            found = preflight_findings(self.spec, report)
            self.writes.call(findings.save_preflight_findings, self.run_id, found,
                             lease=self.writes.held)  # fmt: skip
        except (LeaseLost, GaveUp):  # not the doctor's failure: the run stops
            raise
        except Exception:  # noqa: BLE001 - the preflight's findings must not fail the run
            log.exception("run %s: the reward preflight's findings were not written", self.run_id)

    def save_step(self, report: StepReport) -> None:
        """Write the step with its findings; without them once the doctor has failed (a
        failed write of both is tried again as the step alone, which raises what it raises)."""
        held = self.writes.held
        if not self.is_broken:
            try:
                found, is_full = self.observe(report)
                self.writes.call(findings.save_diagnosed_step, self.run_id, report, found,
                                 spec=self.spec, is_full=is_full, lease=held)  # fmt: skip
                return
            except (LeaseLost, GaveUp):  # not the doctor's failure: the run stops
                raise
            except Exception:  # noqa: BLE001 - a doctor's bug must not fail the run
                log.exception("run %s: the doctor failed at step %s; off for this run",
                              self.run_id, report.step)  # fmt: skip
                self.is_broken = True
        self.writes.call(steps.save_step, self.run_id, report, lease=held)
