"""The tables bench/vs_trl.py prints: step time, throughput and memory per configuration
with the paired ours/TRL ratios, and (--learning) reward and accuracy over seeds."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from paired import median_with_interval, paired_ratios
from side_pair import SideResult, run_pair
from side_protocol import RunConfig
from vs_trl_configs import configured


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else float("nan")


def print_timing(
    name: str, results: dict[str, SideResult], config: RunConfig, warmup: int
) -> dict[str, float]:
    """Table rows of one configuration; returns its ratios (`s/step` is the paired median)."""
    rows = {}
    for side, result in results.items():
        q1, q3 = result.quartiles(warmup)
        rows[side] = {
            "s/step": result.median_seconds(warmup),
            "tok/s": result.tokens_per_second(warmup),
            "growth": result.done["peak"] - result.ready["after_setup"],
            "peak": max(result.done["peak"], result.ready["setup_peak"]),
        }
        row = rows[side]
        length = result.mean_length(warmup, config.completions_per_step)
        print(
            f"{name:<10} {'ours' if side == 'ours' else 'TRL':<6} {row['s/step']:>9.3f} "
            f"{q1:>7.3f}-{q3:<7.3f} {row['tok/s']:>9.0f} {length:>6.1f} "
            f"{result.ready['after_setup']:>9.0f} {row['growth']:>9.0f} {row['peak']:>9.0f}"
        )
    ratios = {key: ratio(rows["ours"][key], rows["trl"][key]) for key in rows["ours"]}
    seconds = {side: [s["seconds"] for s in r.timed(warmup)] for side, r in results.items()}
    paired, low, high = median_with_interval(paired_ratios(seconds["ours"], seconds["trl"]))
    ratios["s/step"] = paired
    print(
        f"{name:<10} {'ratio':<6} {paired:>9.2f} {f'[{low:.2f}, {high:.2f}]':^15} "
        f"{ratios['tok/s']:>9.2f} {'':>6} {'':>9} {ratios['growth']:>9.2f} {ratios['peak']:>9.2f}"
    )
    return ratios


def timing_section(args: argparse.Namespace, base: RunConfig) -> dict[str, dict[str, float]]:
    total = args.warmup + args.steps
    ratios = {}
    header = (
        f"{'config':<10} {'side':<6} {'s/step':>9} {'p25-p75':^15} {'tok/s':>9} {'len':>6} "
        f"{'setup MiB':>9} {'growth':>9} {'peak MiB':>9}"
    )
    collected = {}
    for name in args.configs:
        config = configured(base, name, args.model_dirs, total_steps=total)
        before = load_text()
        started = time.perf_counter()
        collected[name] = (config, run_pair(config, verbose=args.verbose))
        threads = "/".join(str(r.done["threads"]) for r in collected[name][1].values())
        print(
            f"[{name}: {total} steps per side in {time.perf_counter() - started:.0f} s; "
            f"load average before {before}, after {load_text()}; threads ours/TRL {threads}]",
            flush=True,
        )
    print()
    print(
        f"seconds per step: median over {args.steps} steps after {args.warmup} warm-up steps "
        "(ratio row: median of the per-step paired ratios ours/TRL [bootstrap 95% interval]); "
        "tok/s = completion tokens / time over those steps; len = mean completion tokens; "
        "setup = RSS once imports, model, reference and optimizer are in place; growth = peak "
        "RSS after that point minus setup (VmHWM reset there); peak = the process's whole peak"
    )
    print(header)
    for name, (config, results) in collected.items():
        ratios[name] = print_timing(name, results, config, args.warmup)
    for name, (_, results) in collected.items():
        steps = results["ours"].timed(args.warmup)
        phases = {
            key.removeprefix("time/"): statistics.median(s["phases"][key] for s in steps)
            for key in steps[0]["phases"]
        }
        print(
            f"ours {name}, median seconds by phase: "
            + ", ".join(f"{k} {v:.3f}" for k, v in phases.items())
        )
    return ratios


def initial_accuracy(config: RunConfig) -> float:
    """Greedy test accuracy of the starting model (the same evaluation both sides run after)."""
    import torch

    from grpo.data.loading import load_examples
    from grpo.eval.greedy import greedy_accuracy
    from grpo.models.loading import load_policy
    from grpo.spec.data import DataSpec

    torch.set_num_threads(config.threads)
    data = DataSpec(prompt_template=config.prompt_template, use_chat_template=False)
    model, tokenizer = load_policy(
        config.model_dir, cache_dir=Path(config.model_dir), progress=False
    )
    return greedy_accuracy(model, tokenizer, load_examples(data, split="test"), data)


def learning_section(args: argparse.Namespace, base: RunConfig) -> None:
    """Reward after --learning-steps steps over --seeds, ours against TRL's, per configuration."""
    print()
    print(
        f"learning over {args.learning_steps} steps: sampled training reward, mean of the first "
        f"10 -> last 10 steps, and greedy test accuracy after (same evaluation both sides)"
    )
    print(
        f"{'config':<10} {'seed':>4} {'ours reward':>15} {'TRL reward':>15} "
        f"{'ours acc':>9} {'TRL acc':>8}"
    )
    for name in args.learning_configs:
        finals: dict[str, list[float]] = {"ours": [], "trl": []}
        accuracies: dict[str, list[float]] = {"ours": [], "trl": []}
        for seed in args.seeds:
            config = configured(
                base,
                name,
                args.model_dirs,
                total_steps=args.learning_steps,
                seed=seed,
                evaluate=True,
            )
            results = run_pair(config, verbose=args.verbose)
            for side, result in results.items():
                finals[side].append(result.final_reward())
                accuracies[side].append(result.done["accuracy"])
            rewards = "".join(
                f" {r.initial_reward():>6.3f} -> {r.final_reward():.3f}" for r in results.values()
            )
            print(
                f"{name:<10} {seed:>4}{rewards} {accuracies['ours'][-1]:>9.3f} "
                f"{accuracies['trl'][-1]:>8.3f}  (load {load_text()})",
                flush=True,
            )
        ours, theirs = statistics.mean(finals["ours"]), statistics.mean(finals["trl"])
        ours_acc, trl_acc = (statistics.mean(accuracies[side]) for side in ("ours", "trl"))
        verdict = "no lower than TRL's" if ours >= theirs else "LOWER than TRL's"
        before = initial_accuracy(configured(base, name, args.model_dirs))
        print(
            f"{name:<10} {'mean':>4} {'':>6} -> {ours:.3f} {'':>6} -> {theirs:.3f} "
            f"{ours_acc:>9.3f} {trl_acc:>8.3f}"
            f"  (greedy accuracy before: {before:.3f}); "
            f"final reward of ours {verdict}"
        )
