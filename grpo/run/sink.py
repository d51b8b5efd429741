"""What hears of a run: a sink. The store and the run doctor on the worker, the trackers of
`logging.report_to` from every door, the terminal's progress bar for `grpo train`, the
reports the Python API keeps. grpo/run/run.py calls every sink of a run, in the order given,
for each of the hooks below; a sink overrides the ones it needs. Knows nothing of torch.
"""

from __future__ import annotations

from grpo.report import EvalReport, SavedCheckpoint, StepReport
from grpo.report.trackers import Outcome
from grpo.rewards.trial_report import PreflightReport


class Sink:
    """A sink that hears nothing and never stops the run: override what yours needs."""

    hands_back: tuple[type[BaseException], ...] = ()
    """Errors after which the run goes on in a later attempt: raised through the run, they
    close every sink as `handed_back` rather than `failed`."""

    def open(self) -> None:
        """The run is built (model loaded) and about to train its first step."""

    def add_log(self, level: str, message: str) -> None:
        """A line of the run's log (level: info, warning, error)."""

    def log_preflight(self, report: PreflightReport) -> None:
        """The rewards' preflight before the first step (rank 0; grpo/run/preflight.py)."""

    def log_step(self, report: StepReport) -> None:
        """A step trained (rank 0 only, as every report below)."""

    def log_eval(self, report: EvalReport) -> None:
        """A held-out evaluation."""

    def log_checkpoint(self, saved: SavedCheckpoint) -> None:
        """A checkpoint, once in place."""

    def fence(self) -> None:
        """Right before a checkpoint is renamed into place: raise when this process may no
        longer write the run's files."""

    def stop_reason(self) -> Outcome | None:
        """Asked between steps: why the run should stop now (`cancelled`, `handed_back`),
        or None to go on. A run stopped early ends as the reason a sink still gives at its
        end (`cancelled` first)."""
        return None

    def close(self, outcome: Outcome) -> None:
        """The attempt ended as `outcome`."""
