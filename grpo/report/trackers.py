"""Trackers people already use (spec `logging.report_to`): each step's scalars and
histograms and each evaluation's metrics also go to them. Our store stays the source of
truth; a tracker is imported only when a run asks for it (the `trackers` extra).

TensorBoard: event files under `<workdir>/tensorboard/`, through torch's SummaryWriter; a
histogram is written from its fixed bins (bucket limits are the upper edges; sum and sum of
squares from the bin centres, as the counts are all that is kept).

MLflow: one MLflow run per run (named by `run_name`, in the experiment `grpo`) at the
tracking URI the caller passes (the worker passes the operator's `GRPO_MLFLOW_URI`; grpo
never reads app settings), default a SQLite store `<workdir>/mlflow.db` (MLflow 3 refuses
plain `file:` stores unless MLFLOW_ALLOW_FILE_STORE=true). Scalars and eval
metrics only: MLflow has no histogram type, so histograms are not sent. Metric names keep
MLflow's allowed characters; any other (the `@` of `pass@k`) becomes `_`; in a `file:`
store (MLFLOW_ALLOW_FILE_STORE=true) `/` becomes `.` too, as a file store cannot hold both
`time/reward` and `time/reward/<label>`.

Weights & Biases: one W&B run per run (project `grpo`, named by `run_name`), files under
`<workdir>/wandb/`; scalars, histograms (wandb.Histogram from the bins) and eval metrics.
Online or offline is W&B's own configuration on the worker (`WANDB_MODE`, `wandb login`).
Each log call is one committed W&B row carrying our `step`, the x-axis of every metric
(`define_metric`, as transformers' WandbCallback does with `train/global_step`): a row
logged with W&B's own `step=` stays open until a later step arrives, and a killed worker
loses it.

Across attempts at one run (requeued, resumed) the trackers keep ONE run each:
`<workdir>/trackers.json` holds the MLflow and W&B run ids and the last step and eval sent
to them; a later attempt reopens those runs and does not send again a step re-done after
its checkpoint (MLflow cannot overwrite a metric, only append a second value at the same
step; W&B would keep a second row), so each holds each step once, from its first attempt. A
worker killed after MLflow took a step but before the file said so: the next attempt reads
the reopened MLflow run's own last step too (W&B may lose that step instead: its killed
process may not have written it). A step's MLflow batch is written with its STEP_KEY last:
a file store writes a batch one metric at a time, and a worker killed halfway leaves some
of the step's metrics without its STEP_KEY; the next attempt sends that step's other
metrics only, so each metric still holds each step once. TensorBoard appends a new event
file to the same directory and writes a purge at the attempt's first step: TensorBoard (its
EventAccumulator) then drops what earlier attempts wrote from that step on, so it shows the
re-done values, as our store does; a raw read of the event files still sees both.
`close(outcome)` ends each tracker's run as the attempt ended (see `Outcome`).

Knows nothing of SQL.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from grpo.report import (
    ADVANTAGE_BIN_EDGES,
    GROUP_REWARD_STD_BIN_EDGES,
    REWARD_BIN_EDGES,
    EvalReport,
    StepReport,
)
from grpo.spec import JobSpec

MLFLOW_EXPERIMENT = "grpo"
WANDB_PROJECT = "grpo"
STATE_FILE = "trackers.json"
STEP_KEY = "reward"
"""A key every training step's scalars hold, written last of a step's MLflow batch: its
history says which steps a reopened run already holds whole."""
_MLFLOW_UNSAFE = re.compile(r"[^\w\-. /]")

Outcome = Literal["succeeded", "failed", "cancelled", "handed_back"]
"""How an attempt at a run ended. MLflow status FINISHED, FAILED, KILLED; W&B exit code 0,
1, 130 (128 + SIGINT: stopped by its user). `handed_back`: the run goes on in a later
attempt (its worker stopped, or lost it): MLflow's run stays RUNNING for that attempt to
reopen, W&B's is marked preempting and exits 143 (128 + SIGTERM), W&B's rule for a run
that is to be resumed."""
MLFLOW_STATUS = {"succeeded": "FINISHED", "failed": "FAILED", "cancelled": "KILLED"}
WANDB_EXIT_CODE = {"succeeded": 0, "failed": 1, "cancelled": 130, "handed_back": 143}


@dataclass
class TrackerState:
    """What a later attempt at the run needs: its tracker runs, and how far they got."""

    mlflow_run_id: str | None = None
    wandb_run_id: str | None = None
    logged_step: int = -1
    logged_eval: int = -1

    @classmethod
    def load(cls, workdir: Path) -> TrackerState:
        path = workdir / STATE_FILE
        return cls(**json.loads(path.read_text())) if path.exists() else cls()

    def save(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = workdir / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, workdir / STATE_FILE)  # a killed worker leaves the old file or the new


class Trackers:
    """The spec's trackers, opened (or reopened) on the run's directory; `close` ends them."""

    def __init__(
        self,
        spec: JobSpec,
        workdir: Path,
        *,
        run_name: str | None = None,
        mlflow_uri: str | None = None,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        name = run_name or self.workdir.name
        report_to = spec.logging.report_to
        self.has_board = "tensorboard" in report_to
        if self.has_board:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401 - fail at open
        self.writer: Any = None  # opened at the first step this attempt logs: see _board
        self.state = TrackerState.load(self.workdir)
        self.mlflow: MlflowRun | None = None
        self.wandb: Any = None
        try:
            if "mlflow" in report_to:
                uri = mlflow_uri or f"sqlite:///{self.workdir / 'mlflow.db'}"
                self.mlflow = MlflowRun(uri, name, reopen=self.state.mlflow_run_id)
                self.state.mlflow_run_id = self.mlflow.run_id
                self.state.save(self.workdir)
            if "wandb" in report_to:
                self.state.wandb_run_id = self.state.wandb_run_id or uuid.uuid4().hex[:16]
                self.state.save(self.workdir)  # before init: a crash in it still reopens the id
                self.wandb = _wandb_run(self.workdir, name, self.state.wandb_run_id)
        except BaseException:
            self.close("failed")
            raise

    def log_step(self, report: StepReport) -> None:
        training = {k: v for k, v in report.scalars.items() if not k.startswith("eval/")}
        if report.step > self.state.logged_step:  # not sent by an earlier attempt
            # nor by one killed between MLflow's write and the state file's (its history)
            if self.mlflow is not None and report.step > self.mlflow.last_step:
                self.mlflow.log(training, report.step)  # eval/ keys: log_eval sends those
            if self.wandb is not None:
                histograms = self._wandb_histograms(report)
                self.wandb.log({"step": report.step, **training, **histograms})
            self._sent(step=report.step)
        if not self.has_board:
            return
        writer = self._board(report.step)
        for key, value in training.items():
            writer.add_scalar(key, value, report.step)
        for tag, counts, edges in _histograms(report):
            self._histogram(tag, counts, edges, report.step)

    def log_eval(self, report: EvalReport) -> None:
        if report.step > self.state.logged_eval:
            if self.mlflow is not None:
                self.mlflow.log(report.scalars, report.step)
            if self.wandb is not None:
                self.wandb.log({"step": report.step, **report.scalars})
            self._sent(evaluation=report.step)
        if not self.has_board:
            return
        writer = self._board(report.step)
        for key, value in report.scalars.items():
            writer.add_scalar(key, value, report.step)

    def _sent(self, *, step: int | None = None, evaluation: int | None = None) -> None:
        if self.mlflow is None and self.wandb is None:
            return
        self.state.logged_step = self.state.logged_step if step is None else step
        self.state.logged_eval = self.state.logged_eval if evaluation is None else evaluation
        self.state.save(self.workdir)

    def _board(self, step: int) -> Any:
        """The SummaryWriter, opened at this attempt's first logged step: a directory an
        earlier attempt wrote gets a purge from that step on (TensorBoard's restart rule)."""
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter

            directory = self.workdir / "tensorboard"
            purge_step = step if directory.exists() else None
            self.writer = SummaryWriter(log_dir=str(directory), purge_step=purge_step)
        return self.writer

    @staticmethod
    def _wandb_histograms(report: StepReport) -> dict[str, Any]:
        import numpy as np
        import wandb

        return {
            tag: wandb.Histogram(np_histogram=(np.asarray(counts), np.asarray(edges)))
            for tag, counts, edges in _histograms(report)
        }

    def _histogram(self, tag: str, counts: list[int], edges: tuple[float, ...], step: int) -> None:
        centres = [(a + b) / 2 for a, b in zip(edges, edges[1:], strict=False)]
        filled = [i for i, c in enumerate(counts) if c]
        self.writer.add_histogram_raw(
            tag,
            min=edges[filled[0]],
            max=edges[filled[-1] + 1],
            num=sum(counts),
            sum=sum(c * x for c, x in zip(counts, centres, strict=True)),
            sum_squares=sum(c * x * x for c, x in zip(counts, centres, strict=True)),
            bucket_limits=list(edges[1:]),
            bucket_counts=counts,
            global_step=step,
        )

    def close(self, outcome: Outcome) -> None:
        """End each tracker's run as this attempt ended (see `Outcome`)."""
        if self.writer is not None:
            self.writer.close()
        if self.mlflow is not None and outcome != "handed_back":
            self.mlflow.close(MLFLOW_STATUS[outcome])
        if self.wandb is not None:
            if outcome == "handed_back":
                self.wandb.mark_preempting()
            self.wandb.finish(exit_code=WANDB_EXIT_CODE[outcome])


def _histograms(report: StepReport) -> list[tuple[str, list[int], tuple[float, ...]]]:
    """The step's non-empty histograms: (tag, counts, bin edges)."""
    return [
        (tag, counts, edges)
        for tag, counts, edges in (
            ("advantage_histogram", report.advantage_histogram, ADVANTAGE_BIN_EDGES),
            ("reward_histogram", report.reward_histogram, REWARD_BIN_EDGES),
            (
                "group_reward_std_histogram",
                report.group_reward_std_histogram,
                GROUP_REWARD_STD_BIN_EDGES,
            ),
        )  # fmt: skip
        if sum(counts)
    ]


def _wandb_run(workdir: Path, run_name: str, run_id: str) -> Any:
    """The W&B run `run_id` in project `grpo` (created, or resumed by a later attempt), files
    under `<workdir>/wandb/`. Online or offline, the entity and the API key are W&B's own
    configuration on the worker (WANDB_MODE, WANDB_API_KEY, `wandb login`); stdout is left
    alone (console off). Offline, each attempt writes its own `offline-run-*-<run_id>`
    directory; `wandb sync` joins them into the one run."""
    import wandb

    workdir.mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(console="off", silent=True)
    run = wandb.init(
        project=WANDB_PROJECT, name=run_name, id=run_id, resume="allow", dir=str(workdir),
        reinit="create_new", settings=settings,
    )  # fmt: skip
    run.define_metric("step")
    run.define_metric("*", step_metric="step", step_sync=True)
    return run


class MlflowRun:
    """One MLflow run through MlflowClient (no process-global active run): created, or the
    run `reopen` (an earlier attempt's) set RUNNING again."""

    def __init__(self, uri: str, run_name: str, *, reopen: str | None = None) -> None:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        # a file store keeps a metric as a file: `time/reward` and `time/reward/<label>`
        # cannot both be, so there a name's slashes become dots
        self.is_file_store = urlparse(uri).scheme in ("", "file")
        self.last_step = -1
        """The last training step the run holds whole (an earlier attempt's; -1 for a new
        run): its STEP_KEY, written last of a step's batch (see `batch`)."""
        self.held: dict[str, int] = {}
        """In a file store, each metric's last step: a file store writes a batch one metric
        at a time, so a killed attempt can leave a step half-written (some metrics, not its
        STEP_KEY); the next attempt sends only the rest of that step. Other stores write a
        batch in one transaction: {} there."""
        if reopen is not None:
            try:
                self.client.update_run(reopen, status="RUNNING")
                self.run_id: str = reopen
                marker = self._name(STEP_KEY)
                last = self._last_steps(reopen, None if self.is_file_store else [marker])
                self.last_step = last[marker]
                self.held = last if self.is_file_store else {}
                return
            except MlflowException:  # not at this URI (the operator moved the store)
                pass
        run = self.client.create_run(self._experiment_id(), run_name=run_name)
        self.run_id = run.info.run_id

    def _experiment_id(self) -> str:
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(MLFLOW_EXPERIMENT)
        if found is not None:
            return str(found.experiment_id)
        try:
            return self.client.create_experiment(MLFLOW_EXPERIMENT)
        except MlflowException:  # another worker created it meanwhile
            again = self.client.get_experiment_by_name(MLFLOW_EXPERIMENT)
            if again is None:
                raise
            return str(again.experiment_id)

    def _last_steps(self, run_id: str, keys: list[str] | None) -> dict[str, int]:
        """The last step the run holds of each metric in `keys` (None: every metric it
        holds), and of STEP_KEY's name; -1 for one it does not hold."""
        names = set(self.client.get_run(run_id).data.metrics if keys is None else keys)
        return {
            key: max((m.step for m in self.client.get_metric_history(run_id, key)), default=-1)
            for key in names | {self._name(STEP_KEY)}
        }

    def batch(self, scalars: dict[str, float], step: int) -> list[Any]:
        """The MLflow metrics `log` writes for `step`, in the order written: STEP_KEY last,
        so a run that holds it at a step holds the whole step; none the run already holds at
        this step or later (`held`)."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        marker = self._name(STEP_KEY)
        named = {self._name(key): float(value) for key, value in scalars.items()}
        return [
            Metric(name, named[name], now, step)
            for name in sorted(named, key=lambda name: name == marker)  # stable: marker last
            if self.held.get(name, -1) < step
        ]

    def log(self, scalars: dict[str, float], step: int) -> None:
        metrics = self.batch(scalars, step)
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def _name(self, key: str) -> str:
        name = _MLFLOW_UNSAFE.sub("_", key)
        return name.replace("/", ".") if self.is_file_store else name

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)
