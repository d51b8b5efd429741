"""What a step costs that splitting its prompts over ranks does not split: the spec's step
time at several prompt counts, phase by phase, in one process with one torch thread.

    python bench/step_cost.py [--spec examples/arith-demo.yaml] [--prompts 1,8,16,32] [--steps 30]

One trainer per prompt count is built in this process and they take steps in turn (step 1
of each, then step 2 of each, ...), so the host's slow and fast moments fall on every
count alike; the first 2 steps of each are not timed. Each phase's median seconds
(`time/<phase>` of the step reports; `other` is the rest of `time/step`, what the step
does between and after the four named phases) is fitted by least squares to

    t(B) = fixed + per_prompt * B

over the prompt counts B. `fixed` is what a step costs whatever its size (the dispatch of
each torch op of every decode step, reference pass, forward, backward and optimizer
step); `per_prompt` is what halves when the prompts are split. A data-parallel run of R
ranks on the spec's B prompts then cannot beat (fixed + per_prompt * B / R) / t(B) even
with free communication and cores that do not slow each other: `ideal_ratio` in the last
line, for R = --ranks (bench/scaling.py measures the real ratio, and its `alone` line is
this bound taken on its own run). A fit that is noise (a negative cost, or R^2 under 0.9:
too few timed steps, or a host that changed speed) gets a warning on stderr. Last line:

    step_cost: fixed_ms=<fixed> per_prompt_ms=<per_prompt> ideal_ratio=<bound>
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import yaml  # noqa: E402

from grpo.checkpoints.training_state import start_fresh  # noqa: E402
from grpo.report.timing import REPORTED_PHASES  # noqa: E402
from grpo.spec import JobSpec  # noqa: E402
from grpo.training.trainer import TrainingLoop  # noqa: E402

PHASES = (*REPORTED_PHASES, "other", "step")
WARMUP = 2


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys against xs."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return mean_y - slope * mean_x, slope


def fit_doubt(xs: list[float], ys: list[float]) -> str | None:
    """Why the line fitted to (xs, ys) is not to be trusted, or None: a negative fixed or
    per-prompt cost, or a line that explains under 90% of the variance (R^2 < 0.9). Either
    means the timings are noise (too few timed steps, or a host that changed speed)."""
    fixed, slope = fit_line(xs, ys)
    mean_y = statistics.fmean(ys)
    total = sum((y - mean_y) ** 2 for y in ys)
    left = sum((y - fixed - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = 1.0 - left / total if total else 0.0
    if fixed < 0 or slope < 0:
        return f"a negative cost (fixed {fixed * 1e3:.1f} ms, per prompt {slope * 1e3:.2f} ms)"
    if r2 < 0.9:
        return f"the line explains {r2:.2f} of the variance (R^2 under 0.9)"
    return None


def ideal_ratio(fixed: float, per_prompt: float, *, prompts: int, ranks: int) -> float:
    """A rank's step on prompts/ranks of the prompts against one process's on all of them."""
    return (fixed + per_prompt * prompts / ranks) / (fixed + per_prompt * prompts)


def phase_seconds(scalars: dict[str, float]) -> dict[str, float]:
    """A step's seconds by PHASES, `other` being the step less the four named phases."""
    named = {p: scalars[f"time/{p}"] for p in REPORTED_PHASES}
    return {
        **named,
        "other": scalars["time/step"] - sum(named.values()),
        "step": scalars["time/step"],
    }


def spec_for(data: dict[str, Any], prompts: int, steps: int) -> JobSpec:
    sized = {**data, "prompts_per_step": prompts, "max_steps": steps}
    sized.update(save_steps=0, save_final=False, resources={"num_processes": 1})
    sized["logging"] = {**data.get("logging", {}), "max_groups_per_step": prompts}
    return JobSpec.model_validate(sized)


def measure(
    data: dict[str, Any], counts: list[int], steps: int, cache: Path
) -> dict[int, dict[str, float]]:
    """Median seconds of each phase at each prompt count, the trainers taking turns."""
    with TemporaryDirectory() as tmp:
        trainers = {}
        for count in counts:
            trainer = TrainingLoop(
                spec_for(data, count, steps), workdir=Path(tmp) / str(count), cache_dir=cache
            )
            start_fresh(trainer.checkpoints)
            trainers[count] = trainer
        seen: dict[int, list[dict[str, float]]] = {count: [] for count in counts}
        for step in range(1, steps + 1):
            for count, trainer in trainers.items():
                report = trainer.step(step)
                assert report is not None  # one process: it reports every step
                if step > WARMUP:
                    seen[count].append(phase_seconds(report.scalars))
    return {
        count: {p: statistics.median(s[p] for s in steps_seen) for p in PHASES}
        for count, steps_seen in seen.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "arith-demo.yaml")
    parser.add_argument("--prompts", default="1,8,16,32", help="prompt counts, comma-separated")
    parser.add_argument("--steps", type=int, default=30, help="steps of each count")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path("~/.cache/grpo").expanduser())
    args = parser.parse_args()
    if args.steps <= WARMUP:
        raise SystemExit(f"step_cost: --steps must be more than the {WARMUP} warm-up steps")
    counts = sorted({int(c) for c in args.prompts.split(",")})
    if len(counts) < 2:
        raise SystemExit("step_cost: --prompts needs at least two different counts")
    torch.set_num_threads(1)
    data = yaml.safe_load(args.spec.read_text())
    medians = measure(data, counts, args.steps, args.cache)
    print(f"spec {args.spec.name}, {args.steps - WARMUP} timed steps of each count, 1 torch thread")
    print("prompts " + " ".join(f"{p:>10s}" for p in PHASES) + "   (median ms)")
    for count in counts:
        print(f"{count:7d} " + " ".join(f"{medians[count][p] * 1e3:10.1f}" for p in PHASES))
    fits = {
        p: fit_line([float(c) for c in counts], [medians[c][p] for c in counts]) for p in PHASES
    }
    print("fixed   " + " ".join(f"{fits[p][0] * 1e3:10.1f}" for p in PHASES))
    print("/prompt " + " ".join(f"{fits[p][1] * 1e3:10.2f}" for p in PHASES))
    fixed, per_prompt = fits["step"]
    doubt = fit_doubt([float(c) for c in counts], [medians[c]["step"] for c in counts])
    if doubt:
        print(f"warning: the step's fit is noise, {doubt}: time more steps", file=sys.stderr)
    prompts = int(data["prompts_per_step"])
    bound = ideal_ratio(fixed, per_prompt, prompts=prompts, ranks=args.ranks)
    print(
        f"a rank's share of {prompts} prompts on {args.ranks} ranks costs at best {bound:.3f} of "
        "one process's step (free communication, cores that do not slow each other)"
    )
    ms = f"fixed_ms={fixed * 1e3:.1f} per_prompt_ms={per_prompt * 1e3:.2f}"
    print(f"step_cost: {ms} ideal_ratio={bound:.3f}")


if __name__ == "__main__":
    main()
