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
MLflow's allowed characters; any other (the `@` of `pass@k`) becomes `_`.

Weights & Biases: one W&B run per run (project `grpo`, named by `run_name`), files under
`<workdir>/wandb/`; scalars, histograms (wandb.Histogram from the bins) and eval metrics.
Online or offline is W&B's own configuration on the worker (`WANDB_MODE`, `wandb login`).

Knows nothing of SQL.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

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
_MLFLOW_UNSAFE = re.compile(r"[^\w\-. /]")


class Trackers:
    """The spec's trackers, opened on the run's directory; `close` flushes them."""

    def __init__(
        self,
        spec: JobSpec,
        workdir: Path,
        *,
        run_name: str | None = None,
        mlflow_uri: str | None = None,
    ) -> None:
        self.writer: Any = None
        self.mlflow: MlflowRun | None = None
        if "tensorboard" in spec.logging.report_to:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(Path(workdir) / "tensorboard"))
        if "mlflow" in spec.logging.report_to:
            workdir = Path(workdir).resolve()
            workdir.mkdir(parents=True, exist_ok=True)
            uri = mlflow_uri or f"sqlite:///{workdir / 'mlflow.db'}"
            self.mlflow = MlflowRun(uri, run_name or Path(workdir).name)
        self.wandb: Any = None
        if "wandb" in spec.logging.report_to:
            self.wandb = _wandb_run(Path(workdir), run_name or Path(workdir).name)

    def log_step(self, report: StepReport) -> None:
        training = {k: v for k, v in report.scalars.items() if not k.startswith("eval/")}
        if self.mlflow is not None:  # eval/ keys: log_eval sends those, step 0's included
            self.mlflow.log(training, report.step)
        if self.wandb is not None:
            self.wandb.log({**training, **self._wandb_histograms(report)}, step=report.step)
        if self.writer is None:
            return
        for key, value in training.items():
            self.writer.add_scalar(key, value, report.step)
        for tag, counts, edges in _histograms(report):
            self._histogram(tag, counts, edges, report.step)

    @staticmethod
    def _wandb_histograms(report: StepReport) -> dict[str, Any]:
        import numpy as np
        import wandb

        return {
            tag: wandb.Histogram(np_histogram=(np.asarray(counts), np.asarray(edges)))
            for tag, counts, edges in _histograms(report)
        }

    def log_eval(self, report: EvalReport) -> None:
        if self.mlflow is not None:
            self.mlflow.log(report.scalars, report.step)
        if self.wandb is not None:
            self.wandb.log(dict(report.scalars), step=report.step)
        if self.writer is None:
            return
        for key, value in report.scalars.items():
            self.writer.add_scalar(key, value, report.step)

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

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.mlflow is not None:
            self.mlflow.close()
        if self.wandb is not None:
            self.wandb.finish()


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


def _wandb_run(workdir: Path, run_name: str) -> Any:
    """A W&B run in project `grpo`, files under `<workdir>/wandb/`. Online or offline, the
    entity and the API key are W&B's own configuration on the worker (WANDB_MODE,
    WANDB_API_KEY, `wandb login`); stdout is left alone (console off)."""
    import wandb

    workdir.mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(console="off", silent=True)
    return wandb.init(
        project=WANDB_PROJECT, name=run_name, dir=str(workdir), reinit="create_new",
        settings=settings,
    )  # fmt: skip


class MlflowRun:
    """One MLflow run through MlflowClient (no process-global active run)."""

    def __init__(self, uri: str, run_name: str) -> None:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        found = self.client.get_experiment_by_name(MLFLOW_EXPERIMENT)
        try:
            experiment_id = (
                found.experiment_id if found else self.client.create_experiment(MLFLOW_EXPERIMENT)
            )
        except MlflowException:  # another worker created it meanwhile
            again = self.client.get_experiment_by_name(MLFLOW_EXPERIMENT)
            if again is None:
                raise
            experiment_id = again.experiment_id
        run = self.client.create_run(experiment_id, run_name=run_name)
        self.run_id: str = run.info.run_id

    def log(self, scalars: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(_MLFLOW_UNSAFE.sub("_", key), float(value), now, step)
            for key, value in scalars.items()
        ]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)
