"""Peak memory of one GRPO step as the batch grows: bounded by the batching knobs, not B x G.

    python bench/memory.py [--model builtin:small] [--sizes 64 256 1024] [--threads 1]

One step of `--model` (G 16, max_completion_length 32, beta 0.04 so the reference pass
runs) at each B x G in `--sizes`, each in a fresh process, first with micro_batch_size 16
and generation_batch_size 64, then with both unset (everything at once) for contrast.
The child builds the TrainingLoop (imports, model, reference copy, data), takes its RSS as the
baseline, resets the kernel's peak-RSS mark (`5` into /proc/self/clear_refs), runs one
step, and reports VmHWM - baseline. Last line, for the batched runs:

    memory: growth_mib bg64=<a> bg256=<b> bg1024=<c> ratio=<c/a>
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GENERATIONS = 16
BATCHED = {"micro_batch_size": 16, "generation_batch_size": 64}


def status_mib(field: str) -> float:
    """A `VmRSS:`/`VmHWM:` line of /proc/self/status, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(model: str, size: int, is_batched: bool) -> dict[str, float]:
    """One step in this process; the peak RSS growth over the loaded trainer's RSS."""
    from grpo.spec import JobSpec
    from grpo.training.trainer import TrainingLoop

    spec = JobSpec(
        model=model,
        prompts_per_step=size // GENERATIONS,
        num_generations=GENERATIONS,
        max_completion_length=32,
        max_steps=1,
        save_steps=0,
        **(BATCHED if is_batched else {}),
    )
    cache = Path(os.environ.get("GRPO_CACHE_DIR", "~/.cache/grpo")).expanduser()
    with tempfile.TemporaryDirectory() as workdir:
        trainer = TrainingLoop(spec, workdir=Path(workdir), cache_dir=cache)
        baseline = status_mib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS from here
        started = time.perf_counter()
        report = trainer.step(1)
        seconds = time.perf_counter() - started
        peak = status_mib("VmHWM")
    tokens = report.scalars["completions/mean_length"] * size
    return {"baseline": baseline, "growth": peak - baseline, "seconds": seconds, "tokens": tokens}


def measure(model: str, size: int, is_batched: bool, threads: int) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    argv = [sys.executable, __file__, "--child", str(size), "--model", model]
    done = subprocess.run(
        [*argv, *(["--batched"] if is_batched else [])], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"B x G {size} failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="builtin:small")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--batched", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(child(args.model, args.child, args.batched)))
        return
    growth: dict[bool, list[float]] = {True: [], False: []}
    print(f"model {args.model}, G {GENERATIONS}, 32-token completions, {args.threads} thread(s)")
    print(f"{'knobs':<34} {'B x G':>6} {'baseline MiB':>13} {'growth MiB':>11} {'s/step':>7}")
    for is_batched in (True, False):
        knobs = "micro 16, generation 64" if is_batched else "unset (all at once)"
        for size in args.sizes:
            row = measure(args.model, size, is_batched, args.threads)
            growth[is_batched].append(row["growth"])
            print(
                f"{knobs:<34} {size:>6} {row['baseline']:>13.0f} {row['growth']:>11.1f} "
                f"{row['seconds']:>7.1f}",
                flush=True,
            )
    for is_batched, label in ((False, "unbatched"), (True, "memory")):
        figures = " ".join(
            f"bg{size}={value:.2f}"
            for size, value in zip(args.sizes, growth[is_batched], strict=True)
        )
        ratio = growth[is_batched][-1] / max(growth[is_batched][0], 1e-9)
        print(f"{label}: growth_mib {figures} ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
