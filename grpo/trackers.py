"""Trackers people already use (spec `logging.report_to`): each step's scalars and
histograms and each evaluation's metrics also go to them. Our store stays the source of
truth; a tracker is imported only when a run asks for it (the `trackers` extra).

TensorBoard: event files under `<workdir>/tensorboard/`, through torch's SummaryWriter; a
histogram is written from its fixed bins (bucket limits are the upper edges; sum and sum of
squares from the bin centres, as the counts are all that is kept). Knows nothing of SQL.
"""

from __future__ import annotations

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


class Trackers:
    """The spec's trackers, opened on the run's directory; `close` flushes them."""

    def __init__(self, spec: JobSpec, workdir: Path) -> None:
        self.writer: Any = None
        if "tensorboard" in spec.logging.report_to:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(Path(workdir) / "tensorboard"))

    def log_step(self, report: StepReport) -> None:
        if self.writer is None:
            return
        for key, value in report.scalars.items():
            if not key.startswith("eval/"):  # log_eval writes those, step 0's included
                self.writer.add_scalar(key, value, report.step)
        for tag, counts, edges in (
            ("advantage_histogram", report.advantage_histogram, ADVANTAGE_BIN_EDGES),
            ("reward_histogram", report.reward_histogram, REWARD_BIN_EDGES),
            ("group_reward_std_histogram", report.group_reward_std_histogram,
             GROUP_REWARD_STD_BIN_EDGES),
        ):  # fmt: skip
            if sum(counts):
                self._histogram(tag, counts, edges, report.step)

    def log_eval(self, report: EvalReport) -> None:
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
