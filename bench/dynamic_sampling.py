"""What dynamic sampling (DAPO) costs and buys on the demo: the demo spec trained twice
side by side, dynamic sampling off and on, steps alternating so machine load falls alike.

    .venv/bin/python bench/dynamic_sampling.py [--steps 300] [--max-rounds 3]

Prints seconds per step (median and mean), the share of trained groups with signal (per
step: min and mean), groups dropped and rounds per step, extra completions generated, and
greedy accuracy on 400 test problems before and after, the number GRPO should raise (the
sampled reward of a dynamic-sampling run is that of its kept groups, biased by the filter).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.api.routes.presets import DEMO_SPEC  # noqa: E402
from grpo.data.loading import load_examples  # noqa: E402
from grpo.eval.greedy import greedy_accuracy  # noqa: E402
from grpo.training.trainer import TrainingLoop  # noqa: E402


def accuracy(trainer: TrainingLoop, n: int = 400) -> float:
    data = trainer.spec.data
    examples = load_examples(data.model_copy(update={"split": "test"}))[:n]
    trainer.model.eval()
    return greedy_accuracy(trainer.model, trainer.tokenizer, examples, data, max_new_tokens=6)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=DEMO_SPEC.max_steps)
    parser.add_argument("--max-rounds", type=int, default=3)
    parser.add_argument("--cache-dir", default=str(Path("~/.cache/grpo").expanduser()))
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = DEMO_SPEC.model_copy(update={"max_steps": args.steps, "save_steps": 0})
    specs = {
        "off": base,
        "on": base.model_validate(
            base.model_dump()
            | {"dynamic_sampling": {"enabled": True, "max_rounds": args.max_rounds}}
        ),
    }
    work = Path(tempfile.mkdtemp(prefix="bench-ds-"))
    trainers = {
        k: TrainingLoop(s, workdir=work / k, cache_dir=Path(args.cache_dir))
        for k, s in specs.items()
    }
    before = accuracy(trainers["off"])
    seconds: dict[str, list[float]] = {k: [] for k in specs}
    signal: dict[str, list[float]] = {k: [] for k in specs}
    dropped, rounds, extra = [], [], []
    for step in range(1, args.steps + 1):
        for side in ("off", "on") if step % 2 else ("on", "off"):
            trainers[side].model.train()
            start = time.perf_counter()
            report = trainers[side].step(step)
            seconds[side].append(time.perf_counter() - start)
            trained = [g for g in report.groups if not g.is_dropped]
            signal[side].append(sum(len(set(g.rewards)) > 1 for g in trained) / len(trained))
            if side == "on":
                dropped.append(report.scalars["dynamic_sampling/dropped_groups"])
                rounds.append(report.scalars["dynamic_sampling/rounds"])
                extra.append(report.scalars["dynamic_sampling/extra_completions"])
    after = {k: accuracy(t) for k, t in trainers.items()}
    print(f"demo spec, {args.steps} steps, max_rounds {args.max_rounds}, steps 1-3 untimed")
    print("side  s/step med  s/step mean  signal min  signal mean  greedy acc before -> after")
    for side in specs:
        timed = seconds[side][3:]
        print(
            f"{side:4}  {statistics.median(timed):11.3f}  {statistics.mean(timed):11.3f}"
            f"  {min(signal[side]):10.3f}  {statistics.mean(signal[side]):11.3f}"
            f"  {before:.3f} -> {after[side]:.3f}"
        )
    ratio = statistics.mean(seconds["on"][3:]) / statistics.mean(seconds["off"][3:])
    print(f"step time on/off: {ratio:.2f}x")
    print(
        f"dropped groups/step {statistics.mean(dropped):.1f}, rounds/step "
        f"{statistics.mean(rounds):.2f}, extra completions/step {statistics.mean(extra):.0f}, "
        f"steps short of signal {sum(s < 1 for s in signal['on'])}"
    )


if __name__ == "__main__":
    main()
