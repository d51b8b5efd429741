"""One run of bench/async.py: trains the spec given as JSON in this process (as `grpo
train` does, through grpo/cli/train.py's fit_here) and writes, per step, the monotonic
time its report arrived and the scalars the bench reads, to --out as JSON. Started by the
parent under `taskset`, so the trainer's torch threads follow the cores it was given.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from grpo.cli.train import fit_here
from grpo.report import StepReport
from grpo.run import local
from grpo.run.sink import Sink
from grpo.spec import JobSpec

KEPT = (
    "reward", "time/step", "time/generate", "time/train", "time/reference",
    "async/staleness_mean", "async/generator_busy", "async/trainer_busy",
)  # fmt: skip


class Stamps(Sink):
    """Each step's arrival time and kept scalars."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []

    def log_step(self, report: StepReport) -> None:
        kept = {k: report.scalars[k] for k in KEPT if k in report.scalars}
        self.steps.append({"at": time.monotonic(), "step": report.step, **kept})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, required=True, help="a JobSpec as JSON")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    spec = JobSpec.model_validate_json(args.spec.read_text())
    stamps = Stamps()
    fit_here(spec, args.workdir, cache_dir=local.cache_dir(None), sinks=[stamps])
    args.out.write_text(json.dumps({"steps": stamps.steps}))


if __name__ == "__main__":
    main()
