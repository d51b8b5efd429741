"""Does the demo learn on held-out prompts? The demo spec (examples/arith-demo.yaml) with
`eval: {every_steps: 50, max_examples: 100}`, trained in this process with the library's
TrainingLoop (what the worker runs), printing eval/accuracy at each evaluated step.

    .venv/bin/python bench/eval_demo.py [--steps 300] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
import yaml

from grpo.report import EvalReport
from grpo.spec import JobSpec
from grpo.training.trainer import TrainingLoop

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "grpo")
    args = parser.parse_args()
    torch.set_num_threads(1)
    raw = yaml.safe_load((ROOT / "examples" / "arith-demo.yaml").read_text())
    raw.update(max_steps=args.steps, eval={"every_steps": 50, "max_examples": 100})
    spec = JobSpec.model_validate(raw)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="eval-demo-"))
    started = time.perf_counter()

    def report(evaluated: EvalReport) -> None:
        accuracy = evaluated.scalars["eval/accuracy"]
        print(f"step {evaluated.step:4d}  eval/accuracy {accuracy:.3f}", flush=True)

    trainer = TrainingLoop(
        spec, workdir=workdir, cache_dir=args.cache_dir, log=lambda lvl, msg: None
    )
    trainer.fit(lambda step: None, on_eval=report, resume=False)
    print(f"{args.steps} steps in {time.perf_counter() - started:.0f} s (workdir {workdir})")


if __name__ == "__main__":
    main()
