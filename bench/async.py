"""Asynchronous GRPO on a vLLM server against synchronous server mode and today's colocated
vLLM, on a 2-core machine (issue 41, "How it is checked").

    .venv/bin/python bench/async.py          # 3 repeats of 12 steps; gap 200 steps x 3 seeds
    .venv/bin/python bench/async.py --repeats 2 --steps 6 --gap-steps 40 --gap-seeds 1   # smoke

Each run is its own process (bench/async_side.py, bench/async_runs.py), the sides taking
turns: async, sync, colocated, async, ... for --repeats, so a burst of load from other
processes falls on all three alike.

- async: `async_generation: true`, `max_staleness: 1`, `vllm_mode: server`; the server
  (`grpo vllm-serve`) pinned to --server-cpus, the trainer to --trainer-cpus (taskset).
- sync: the same server and cores, synchronous.
- colocated: `vllm_mode: colocate`, the trainer's process (and its engine) on both.

One server per model serves the whole invocation (idle during colocated runs); every run
pushes its own weights to it at its start. The spec: builtin:small on builtin:arith,
--prompts x --generations completions of --length tokens (the random model runs them to the
limit), fp32, vLLM eager on both sides. The defaults (2 x 4 x 128) are the shape where
generation and training (with its reference pass) cost about the same on one core: with
4 x 8 x 48 training cost twice generation, which caps any overlap near 1.4x (the rows print
generation, training and the reference pass). A run's steps per second: the steps after
--warmup over the wall time from the end of the last warm-up step to the end of the last.
A speedup is the median over repeats of each repeat's ratio (min-max beside it).

The reward gap: examples/small-arith-demo.yaml on its own server, async against sync, for
--gap-steps steps and --gap-seeds seeds: mean reward of the last 30 steps, async minus
sync, averaged over the seeds; each side's rise (first 10 steps to last 30) is printed.
staleness_mean is async/staleness_mean over the async throughput runs' timed steps. Last line:

    async: speedup_vs_sync=<x> speedup_vs_colocated=<y> reward_gap=<z> staleness_mean=<s>
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import yaml
from async_runs import RunResult, Server, run_spec
from paired import paired_ratios

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "small-arith-demo.yaml"
SIDES = ("async", "sync", "colocated")
MAX_PROMPT_LENGTH = 128
"""The throughput spec's (arith prompts are ~30 tokens); the server's context is this plus
the completion length."""
LAST = 30
FIRST = 10


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side (0: gap only)")
    parser.add_argument("--steps", type=int, default=12, help="timed steps a run")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps a run")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--length", type=int, default=128, help="max_completion_length")
    parser.add_argument("--server-cpus", default="0")
    parser.add_argument("--trainer-cpus", default="1")
    parser.add_argument("--colocated-cpus", default="0,1")
    parser.add_argument("--gap-steps", type=int, default=200, help="0: skip the reward gap")
    parser.add_argument("--gap-seeds", type=int, default=3)
    return parser.parse_args()


def side_spec(base: dict[str, Any], side: str, url: str) -> dict[str, Any]:
    """`base` as one side runs it."""
    engine: dict[str, Any] = {"use_vllm": True, "vllm_enforce_eager": True}
    if side == "colocated":
        return base | engine | {"vllm_mode": "colocate"}
    engine |= {"vllm_mode": "server", "vllm_server_base_url": url}
    if side == "async":
        engine |= {"async_generation": True, "max_staleness": 1, "weight_sync_steps": 1}
    return base | engine


def throughput_spec(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "name": "async-bench", "model": "builtin:small",
        "data": {"source": "builtin:arith", "use_chat_template": True},
        "rewards": [{"name": "accuracy"}], "max_steps": args.warmup + args.steps,
        "prompts_per_step": args.prompts, "num_generations": args.generations,
        "max_prompt_length": MAX_PROMPT_LENGTH, "max_completion_length": args.length,
        "precision": "fp32", "save_steps": 0, "save_final": False,
    }  # fmt: skip


def cpus_for(side: str, args: argparse.Namespace) -> str:
    return args.colocated_cpus if side == "colocated" else args.trainer_cpus


def measure_throughput(args: argparse.Namespace) -> dict[str, list[RunResult]]:
    """--repeats runs of each side, in turns."""
    base = throughput_spec(args)
    runs: dict[str, list[RunResult]] = {side: [] for side in SIDES}
    server = Server(
        "builtin:small", cpus=args.server_cpus,
        max_model_len=MAX_PROMPT_LENGTH + args.length, max_num_seqs=args.prompts * args.generations,
    )  # fmt: skip
    try:
        for repeat in range(args.repeats):
            for side in SIDES:
                run = run_spec(side_spec(base, side, server.url), cpus=cpus_for(side, args))
                runs[side].append(run)
                sps = run.steps_per_second(args.warmup)
                print(f"  repeat {repeat + 1} {side}: {sps:.3f} steps/s", flush=True)
    finally:
        server.stop()
    return runs


def measure_gap(args: argparse.Namespace) -> dict[str, list[RunResult]]:
    """The demo spec, async and sync on the server, --gap-seeds seeds each, in turns."""
    demo = yaml.safe_load(DEMO.read_text())
    base = demo | {"max_steps": args.gap_steps, "save_steps": 0, "save_final": False}
    runs: dict[str, list[RunResult]] = {"async": [], "sync": []}
    server = Server(
        demo["model"], cpus=args.server_cpus,
        max_model_len=512 + demo["max_completion_length"],  # the spec's default max_prompt_length
        max_num_seqs=demo["prompts_per_step"] * demo["num_generations"],
    )  # fmt: skip
    try:
        for seed in range(args.gap_seeds):
            for side in runs:
                spec = side_spec(base | {"seed": seed}, side, server.url)
                runs[side].append(run := run_spec(spec, cpus=args.trainer_cpus))
                print(
                    f"  gap seed {seed} {side}: reward {first_mean(run):.3f} -> "
                    f"{run.mean('reward', last=LAST):.3f} in {run.seconds:.0f} s",
                    flush=True,
                )
    finally:
        server.stop()
    return runs


def first_mean(run: RunResult) -> float:
    rewards = [s["reward"] for s in run.steps[:FIRST]]
    return sum(rewards) / len(rewards)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.3f}  {min(values):.3f}-{max(values):.3f}"


def report_throughput(runs: dict[str, list[RunResult]], warmup: int) -> dict[str, list[float]]:
    """The per-side table; each repeat's steps per second by side."""
    sps = {side: [r.steps_per_second(warmup) for r in runs[side]] for side in SIDES}
    print("side        steps/s  min-max        gen s  train s  (+ref)  staleness")
    for side in SIDES:
        timed = [RunResult(r.steps[warmup:], r.seconds) for r in runs[side]]
        generate = statistics.median(t.mean("time/generate") for t in timed)
        train = statistics.median(t.mean("time/train") for t in timed)
        reference = statistics.median(t.mean("time/reference") for t in timed)
        stale = statistics.median(t.mean("async/staleness_mean") for t in timed)
        print(
            f"{side:<10}{spread(sps[side])}  {generate:7.3f}  {train:7.3f}  {reference:6.3f}  "
            f"{stale:9.2f}"
        )
    return sps


def throughput(args: argparse.Namespace) -> tuple[float, float, float]:
    """(async/sync, async/colocated, staleness_mean) over --repeats; nan for 0 repeats."""
    if args.repeats <= 0:
        return float("nan"), float("nan"), float("nan")
    runs = measure_throughput(args)
    sps = report_throughput(runs, args.warmup)
    vs_sync = paired_ratios(sps["async"], sps["sync"])
    vs_colocated = paired_ratios(sps["async"], sps["colocated"])
    print(f"async/sync per repeat {spread(vs_sync)}; async/colocated {spread(vs_colocated)}")
    staleness = statistics.mean(
        RunResult(r.steps[args.warmup :], r.seconds).mean("async/staleness_mean")
        for r in runs["async"]
    )
    return statistics.median(vs_sync), statistics.median(vs_colocated), staleness


def main() -> None:
    args = parse()
    vs_sync, vs_colocated, staleness = throughput(args)
    gap = float("nan")
    if args.gap_steps > 0 and args.gap_seeds > 0:
        gap_runs = measure_gap(args)
        finals = {side: [r.mean("reward", last=LAST) for r in rs] for side, rs in gap_runs.items()}
        rises = {side: [r.mean("reward", last=LAST) - first_mean(r) for r in rs]
                 for side, rs in gap_runs.items()}  # fmt: skip
        final, rise = ({k: statistics.mean(v) for k, v in d.items()} for d in (finals, rises))
        gap = final["async"] - final["sync"]
        print(
            f"reward over the last {LAST} steps: async {final['async']:.3f}, sync "
            f"{final['sync']:.3f}; rise (first {FIRST} steps to last {LAST}) async "
            f"{rise['async']:+.3f}, sync {rise['sync']:+.3f}"
        )
    print(
        f"async: speedup_vs_sync={vs_sync:.2f} speedup_vs_colocated={vs_colocated:.2f} "
        f"reward_gap={gap:.3f} staleness_mean={staleness:.2f}"
    )


if __name__ == "__main__":
    main()
