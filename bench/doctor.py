"""What the run doctor costs per step: every rule's detector fed a 10,000-step run.

    .venv/bin/python bench/doctor.py [--steps 10000] [--passes 7]

The run is the healthy demo's recorded metrics (tests/data/doctor_arith_demo.json, 300
steps) repeated to --steps with a step's other scalars beside them (31 keys, as the
trainer reports), and three stretches of trouble laid over it (KL running away, completions
cut at the limit, groups without signal) so findings open, grow, escalate and resolve. The
spec is the demo's with every rule applying (scale_rewards batch, a generation_batch_size,
num_iterations 2, an eval).

Reported: the worker's cost per step (the scalars compacted as the store keeps them, then
Doctor.observe) as the mean of each pass, median over --passes passes with their min and
max; one pass's single steps at p50, p99 and max, in wall time and in the thread's CPU
time (on a loaded machine the wall tail is other processes' time slices); a stored run's
first-read diagnosis
(`diagnose` over all its rows); and the doctor's memory after 1,000 and after all steps
(tracemalloc, over the process's own baseline): its state is bounded. The budget the issue
sets is 1 ms a step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.store.steps import compact_scalars  # noqa: E402
from grpo.doctor import Doctor, diagnose  # noqa: E402
from grpo.spec import JobSpec  # noqa: E402

RECORDED = ROOT / "tests" / "data" / "doctor_arith_demo.json"
OTHER_KEYS = ("loss", "beta", "learning_rate", "clip_ratio/low", "clip_ratio/high",
              "completions/min_length", "completions/max_length", "prompts/truncated",
              "reward_within_group_var_share", "rewards/accuracy/std", "time/reward",
              "time/reference", "time/train", "tokens_per_second", "time/reward/accuracy",
              "rewards/format/mean")  # fmt: skip
TROUBLE = {  # (first step, last step, what is wrong)
    "kl": (2000, 2400, {"kl": 4.0}),
    "cut": (5000, 5600, {"completions/clipped_ratio": 0.7}),
    "flat": (8000, 8500, {"frac_reward_zero_std": 0.97, "groups/all_fail": 31.0}),
}


def spec() -> JobSpec:
    data = yaml.safe_load((ROOT / "examples" / "arith-demo.yaml").read_text())
    data.update(scale_rewards="batch", generation_batch_size=64, num_iterations=2,
                eval={"every_steps": 50}, rewards=[{"name": "accuracy"},
                                                   {"name": "format", "weight": 0.1}])  # fmt: skip
    return JobSpec.model_validate(data)


def series(steps: int) -> list[tuple[int, dict[str, float]]]:
    recorded = json.loads(RECORDED.read_text())["metrics"]
    length = len(next(iter(recorded.values())))
    rows = []
    for step in range(1, steps + 1):
        i = (step - 1) % length
        metrics = {key: values[i] for key, values in recorded.items()}
        metrics.update({key: 0.1 + 0.001 * (step % 97) for key in OTHER_KEYS})
        for first, last, changes in TROUBLE.values():
            if first <= step <= last:
                metrics.update(changes)
        if step % 50 == 0:
            metrics["eval/accuracy"] = 0.4 + 0.0001 * step
        rows.append((step, metrics))
    return rows


def one_pass(job: JobSpec, rows: list[tuple[int, dict[str, float]]]) -> tuple[float, int]:
    """Seconds for the whole series through a new doctor, as the worker feeds it; findings."""
    doctor = Doctor(job)
    written = 0
    started = time.perf_counter()
    for step, scalars in rows:
        written += len(doctor.observe(step, compact_scalars(scalars)))
    return time.perf_counter() - started, written


def single_steps(
    job: JobSpec, rows: list[tuple[int, dict[str, float]]]
) -> tuple[list[float], list[float]]:
    """Each step's wall time and this thread's CPU time, in us, sorted: on a loaded machine
    the wall tail is other processes' time slices, which the CPU time leaves out."""
    doctor = Doctor(job)
    wall, cpu = [], []
    for step, scalars in rows:
        started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
        doctor.observe(step, compact_scalars(scalars))
        cpu.append((time.thread_time_ns() - started_cpu) / 1000)
        wall.append((time.perf_counter_ns() - started) / 1000)
    return sorted(wall), sorted(cpu)


def memory(job: JobSpec, rows: list[tuple[int, dict[str, float]]]) -> tuple[float, float]:
    """KiB the doctor's state holds after 1,000 steps and after all (the rows are built first)."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    doctor = Doctor(job)
    at_1000 = 0.0
    for step, scalars in rows:
        doctor.observe(step, scalars)
        if step == 1000:
            at_1000 = (tracemalloc.get_traced_memory()[0] - base) / 1024
    at_end = (tracemalloc.get_traced_memory()[0] - base) / 1024
    tracemalloc.stop()
    return at_1000, at_end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--passes", type=int, default=7)
    args = parser.parse_args()
    job, rows = spec(), series(args.steps)
    one_pass(job, rows)  # warm-up
    passes = [one_pass(job, rows) for _ in range(args.passes)]
    per_step = sorted(seconds / len(rows) * 1e6 for seconds, _ in passes)
    wall, cpu = single_steps(job, rows)
    stored = []
    for _ in range(args.passes):
        started = time.perf_counter()
        findings = diagnose(job, rows)
        stored.append((time.perf_counter() - started) * 1000)
    at_1000, at_end = memory(job, rows)
    print(f"{len(rows)} steps, {len(Doctor(job).detectors)} rules, "
          f"{sum(len(s) for s in rows[0][1:]) } scalars a step, {args.passes} passes")  # fmt: skip
    print(
        f"findings: {len(findings)} ({', '.join(f.id for f in findings)}); "
        f"{passes[0][1]} writes in a pass"
    )
    print(
        f"per step (worker: compact + observe), mean of a pass: median "
        f"{statistics.median(per_step):.1f} us, min {per_step[0]:.1f}, max {per_step[-1]:.1f}"
    )
    for name, times in (("wall", wall), ("thread CPU", cpu)):
        at = [times[min(len(times) - 1, int(q * len(times)))] for q in (0.5, 0.99)]
        print(
            f"single steps of one pass, {name} time: p50 {at[0]:.1f} us, p99 {at[1]:.1f} us, "
            f"max {times[-1]:.1f} us; budget 1000 us"
        )
    print(
        f"first-read diagnosis of the stored run: median {statistics.median(stored):.0f} ms "
        f"(min {min(stored):.0f}, max {max(stored):.0f})"
    )
    print(f"doctor state: {at_1000:.0f} KiB after 1,000 steps, {at_end:.0f} KiB after {len(rows)}")


if __name__ == "__main__":
    main()
