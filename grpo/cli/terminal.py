"""The terminal as a sink of the run (grpo/run/sink.py), for `grpo train` and the Python API:
a progress bar and the run's log lines on rank 0, Ctrl-C asking for a stop between steps."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from tqdm import tqdm

from grpo.report import StepReport
from grpo.report.trackers import Outcome
from grpo.run.sink import Sink


class TerminalSink(Sink):
    def __init__(self, max_steps: int, *, is_main: bool, keep_stopping: bool = False) -> None:
        """`keep_stopping`: every Ctrl-C only asks for the stop (a launched rank's)."""
        self.max_steps, self.is_main = max_steps, is_main
        self.stop = StopOnInterrupt(keep=keep_stopping)
        self.bar: tqdm[Any] | None = None

    def open(self) -> None:
        """The bar starts once the model is loaded (its first-use build has bars of its own)."""
        self.bar = tqdm(
            total=self.max_steps, desc="grpo", unit="step", dynamic_ncols=True,
            disable=not self.is_main,
        )  # fmt: skip
        self.stop.__enter__()

    def add_log(self, level: str, message: str) -> None:
        if self.is_main:
            tqdm.write(f"[{level}] {message}")

    def log_step(self, report: StepReport) -> None:
        if self.bar is not None:
            self.bar.n = report.step
            self.bar.set_postfix(
                reward=f"{report.scalars['reward']:.3f}", kl=f"{report.scalars['kl']:.4f}"
            )

    def stop_reason(self) -> Outcome | None:
        return "cancelled" if self.stop.is_requested() else None

    def close(self, outcome: Outcome) -> None:
        if self.bar is not None:
            self.bar.close()
            self.stop.__exit__()


class StopOnInterrupt:
    """First Ctrl-C: finish the step, checkpoint, stop. Second: interrupt at once (`keep`:
    every Ctrl-C only asks for the stop)."""

    def __init__(self, *, keep: bool = False) -> None:
        self.requested = False
        self.keep = keep
        self._previous: Any = None

    def __enter__(self) -> StopOnInterrupt:
        # only the main thread may set handlers (the Python API may train in another one)
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and self.keep:
            return
        self.requested = True
        if self.keep:
            print("\nstopping after this step", file=sys.stderr)
            return
        signal.signal(signal.SIGINT, self._previous)
        print("\nstopping after this step (Ctrl-C again to abort)", file=sys.stderr)

    def is_requested(self) -> bool:
        return self.requested
