"""Data-parallel step time: 2 ranks (one torch thread each, gloo) against one process with
one thread, on the demo spec, and whether they sample the same completions.

    python bench/scaling.py [--spec examples/arith-demo.yaml] [--steps 12] [--ranks 2]

Both runs train the spec for --steps steps (no checkpoints) from the same start, each
spawned by torch's launcher (so both start alike), and the pair is repeated --repeats
times, alternating, so load from other processes on the machine falls on both sides
alike; each side's step time is the median of its steps' `time/step` after each run's
first (warm-up; on ranks the max over ranks, as the trainer reports it), and the load
average before each run is printed. `time/step` ends when the rank's own part of the step
is done; the lines before the last also give the median time from one step's report to
the next, which adds gathering the step to rank 0, the report and the stop check, and the
spread of the per-repeat ratios (on a shared VM the same process's step time wanders by
1.5x from one run to the next: read the spread before the median). samples_identical is
the fraction of step 1's completions (text and reward, in step order) equal in both runs,
over all repeats. Each repeat also runs one process on 1/ranks of the step's prompts
alone, then `ranks` such processes at once without a process group (one thread each):
over the full step's time, the first is the ratio the ranks would reach if they neither
communicated nor shared the machine (what is above 1/ranks is work that halving the batch
does not halve), the second adds only the sharing of the cores, and the ranks' own ratio
adds their communication and waiting for each other. Last line:

    scaling: ranks=2 step_time_ratio=<t2/t1> samples_identical=<fraction>
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import yaml  # noqa: E402

from grpo.launch import init_rank, launch_ranks, leave_group  # noqa: E402
from grpo.report import StepReport  # noqa: E402
from grpo.spec import JobSpec  # noqa: E402
from grpo.trainer import Trainer  # noqa: E402

Reported = list[tuple[StepReport, float]]
"""Each step's report, and when it reached on_step (time.perf_counter)."""


def fit(spec: JobSpec, workdir: Path, cache: Path) -> Reported:
    reports: Reported = []
    Trainer(spec, workdir=workdir, cache_dir=cache).fit(
        lambda report: reports.append((report, time.perf_counter())), resume=False
    )
    return reports


def train_rank(spec: JobSpec, workdir: Path, cache: Path) -> Reported:
    """One rank (or the one process) of a run, spawned by the launcher."""
    init_rank(spec.device)
    try:
        return fit(spec, workdir, cache)
    finally:
        leave_group()


def train_beside(spec: JobSpec, workdir: Path, cache: Path) -> Reported:
    """One of `ranks` independent one-process runs at once (no process group, one thread
    each): the ranks' load on the machine without their communication."""
    torch.set_num_threads(1)
    return fit(spec, workdir / os.environ["LOCAL_RANK"], cache)


def step_times(reports: Reported) -> list[float]:
    return [r.scalars["time/step"] for r, _ in reports[1:]]


def wall_times(reports: Reported) -> list[float]:
    """Seconds from one step's report to the next: the step and everything around it (the
    gather to rank 0, the report, the stop check), as a user waits for it."""
    return [b - a for (_, a), (_, b) in zip(reports[1:], reports[2:], strict=False)]


def samples(report: StepReport) -> list[tuple[str, float]]:
    return [(c.text, c.reward) for g in report.groups for c in g.completions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "arith-demo.yaml")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precision", default=None, help="override the spec's (auto/fp32/bf16)")
    args = parser.parse_args()
    cache = Path(os.environ.get("GRPO_CACHE_DIR", "~/.cache/grpo")).expanduser()
    data: dict[str, Any] = yaml.safe_load(args.spec.read_text())
    data.update(max_steps=args.steps, save_steps=0)
    data["logging"] = {**data.get("logging", {}), "max_groups_per_step": data["prompts_per_step"]}
    if args.precision:
        data["precision"] = args.precision
    one = JobSpec.model_validate({**data, "resources": {"num_processes": 1}})
    many = JobSpec.model_validate({**data, "resources": {"num_processes": args.ranks}})
    part = data["prompts_per_step"] // args.ranks
    logging = {**data["logging"], "max_groups_per_step": part}
    share = JobSpec.model_validate(
        {**data, "prompts_per_step": part, "logging": logging, "resources": {"num_processes": 1}}
    )
    torch.set_num_threads(1)
    times: tuple[list[float], list[float]] = ([], [])
    shares: tuple[list[float], list[float]] = ([], [])
    walls: tuple[list[float], list[float]] = ([], [])
    ratios: list[float] = []
    equal, total = 0, 0
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            # both sides spawned by the launcher, so they start alike (fresh process, imports)
            load_one = os.getloadavg()[0]
            single: Reported = launch_ranks(
                train_rank, (one, Path(tmp) / "one", cache), num_processes=1, run_id="a"
            )
            alone: Reported = launch_ranks(
                train_rank, (share, Path(tmp) / "share", cache), num_processes=1, run_id="c"
            )
            beside_args = (share, Path(tmp) / "beside", cache)
            beside: Reported = launch_ranks(
                train_beside, beside_args, num_processes=args.ranks, run_id="d"
            )
            load_many = os.getloadavg()[0]
            ranked: Reported = launch_ranks(
                train_rank, (many, Path(tmp) / "many", cache), num_processes=args.ranks, run_id="b"
            )
        ratios.append(statistics.median(step_times(ranked)) / statistics.median(step_times(single)))
        shares[0].extend(step_times(alone))
        shares[1].extend(step_times(beside))
        times[0].extend(step_times(single))
        times[1].extend(step_times(ranked))
        walls[0].extend(wall_times(single))
        walls[1].extend(wall_times(ranked))
        a, b = samples(single[0][0]), samples(ranked[0][0])
        equal, total = equal + sum(x == y for x, y in zip(a, b, strict=True)), total + len(a)
        print(
            f"repeat {repeat + 1}: 1 process {statistics.median(step_times(single)):.3f} s/step "
            f"(load before {load_one:.1f}), {args.ranks} ranks "
            f"{statistics.median(step_times(ranked)):.3f} s/step (load before {load_many:.1f})"
        )
    t1, t2 = statistics.median(times[0]), statistics.median(times[1])
    w1, w2 = statistics.median(walls[0]), statistics.median(walls[1])
    same = equal / total
    print(f"cores: {os.cpu_count()}; spec {args.spec.name}, {args.steps} steps x {args.repeats}")
    print(
        f"median step: 1 process 1 thread {t1:.3f} s, {args.ranks} ranks 1 thread each {t2:.3f} s"
    )
    print(
        f"median report to report: 1 process {w1:.3f} s, {args.ranks} ranks {w2:.3f} s, "
        f"ratio {w2 / w1:.3f}"
    )
    alone_s, beside_s = statistics.median(shares[0]), statistics.median(shares[1])
    print(
        f"one process on {part} of {data['prompts_per_step']} prompts: alone {alone_s:.3f} s "
        f"a step ({alone_s / t1:.3f} of the full step), {args.ranks} at once without "
        f"communicating {beside_s:.3f} s ({beside_s / t1:.3f})"
    )
    print(
        f"per-repeat ratio: median {statistics.median(ratios):.3f}, "
        f"min {min(ratios):.3f}, max {max(ratios):.3f}"
    )
    print(f"scaling: ranks={args.ranks} step_time_ratio={t2 / t1:.3f} samples_identical={same:.3f}")


if __name__ == "__main__":
    main()
