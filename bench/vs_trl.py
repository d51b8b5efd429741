"""Our GRPO trainer against TRL's GRPOTrainer: the same model, prompts, reward and knobs.

    .venv/bin/python bench/vs_trl.py                 (three configurations, 40 timed steps)
    .venv/bin/python bench/vs_trl.py --learning      (+ reward after 50 steps, 3 seeds)

Needs TRL (the `bench` extra; never a runtime dependency). Both sides train the same
built-in model from the same local directory (weights and tokenizer through
`from_pretrained`) on the built-in arithmetic prompts in the same order, scored by the same
accuracy reward (grpo.rewards), with identical G, prompts per step, completion length,
beta, learning rate, optimizer, clipping and precision (fp32 on both sides).

Each side runs in its own child process and the parent alternates them step by step, ours
first on even steps and TRL first on odd ones, so load from other processes falls on both
alike; the first --warmup steps are not timed. The step-time headline is the median of the
per-step paired ratios ours/TRL with a bootstrap 95% interval (bench/paired.py). Memory:
each side resets its peak RSS (VmHWM) once imports, model, reference and optimizer are in
place, so `growth` is the peak a training step adds over that process's own baseline (TRL's
larger imports no longer flatter us); the whole-process peak stays as a second column.
Configurations: `short` (builtin:tiny-arith, bare prompts like `23+45=`, 16 completion
tokens), `realistic` (builtin:tiny-arith, a short R1-style instruction, 32 tokens), both
8 prompts x G 8; `medium` (builtin:small: 11 M-parameter Qwen2, 32k BPE; the task inside
the R1-Zero template, 4 prompts x G 8, 64 tokens). beta 0.04 everywhere. The last line reads
`vs TRL: step time ratio short=<x> realistic=<y> medium=<z>; peak memory growth ratio
short=<a> realistic=<b> medium=<c>`.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ours_side  # noqa: E402
import trl_side  # noqa: E402
from paired import median_with_interval, paired_ratios  # noqa: E402
from side_protocol import RunConfig  # noqa: E402

from grpo.data import R1_TEMPLATE  # noqa: E402

SHORT_TEMPLATE = "{prompt}"
REALISTIC_TEMPLATE = "Reply <think></think><answer></answer>. User: {prompt} Assistant:"
"""A short R1-style instruction around the task: 64 prompt tokens with the char tokenizer."""


@dataclass(frozen=True)
class Config:
    model: str
    template: str
    completion_tokens: int
    prompts_per_step: int | None = None
    """None: --prompts-per-step."""


CONFIGS: dict[str, Config] = {
    "short": Config("builtin:tiny-arith", SHORT_TEMPLATE, 16),
    "realistic": Config("builtin:tiny-arith", REALISTIC_TEMPLATE, 32),
    "medium": Config("builtin:small", R1_TEMPLATE, 64, prompts_per_step=4),
}
"""name -> model, prompt template, max completion tokens, prompts per step."""
SIDES = {"ours": ours_side.run, "trl": trl_side.run}
STEP_TIMEOUT_S = 600


def configured(base: RunConfig, name: str, model_dirs: dict[str, str], **changes: Any) -> RunConfig:
    """`base` set up as configuration `name`, with `changes`."""
    config = CONFIGS[name]
    return replace(
        base,
        name=name,
        model_dir=model_dirs[config.model],
        prompt_template=config.template,
        max_completion_length=config.completion_tokens,
        prompts_per_step=config.prompts_per_step or base.prompts_per_step,
        **changes,
    )


@dataclass
class SideResult:
    """What one side reported: setup memory, every step, peak memory, final accuracy."""

    ready: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    done: dict[str, Any] = field(default_factory=dict)

    def timed(self, warmup: int) -> list[dict[str, Any]]:
        return self.steps[warmup:]

    def median_seconds(self, warmup: int) -> float:
        return float(statistics.median(s["seconds"] for s in self.timed(warmup)))

    def quartiles(self, warmup: int) -> tuple[float, float]:
        seconds = [s["seconds"] for s in self.timed(warmup)]
        if len(seconds) < 2:
            return seconds[0], seconds[0]
        q = statistics.quantiles(seconds, n=4)
        return q[0], q[2]

    def tokens_per_second(self, warmup: int) -> float:
        """Completion tokens (EOS included) generated per second, over the timed steps."""
        steps = self.timed(warmup)
        return float(sum(s["tokens"] for s in steps) / sum(s["seconds"] for s in steps))

    def mean_length(self, warmup: int, completions_per_step: int) -> float:
        steps = self.timed(warmup)
        return float(sum(s["tokens"] for s in steps) / (len(steps) * completions_per_step))

    def initial_reward(self, first: int = 10) -> float:
        """Mean training reward of the first `first` steps."""
        head = self.steps[:first]
        return float(sum(s["reward"] for s in head) / len(head))

    def final_reward(self, last: int = 10) -> float:
        """Mean training reward of the last `last` steps."""
        tail = self.steps[-last:]
        return float(sum(s["reward"] for s in tail) / len(tail))


class Child:
    """One side's process and the parent's end of its pipe."""

    def __init__(self, context: Any, name: str, config: RunConfig) -> None:
        self.name = name
        self.conn, child_conn = context.Pipe()
        self.process = context.Process(target=SIDES[name], args=(child_conn, config), daemon=True)
        self.process.start()
        child_conn.close()

    def expect(self, kind: str) -> dict[str, Any]:
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while not self.conn.poll(1.0):
            if not self.process.is_alive():
                raise RuntimeError(f"{self.name} side died (exit code {self.process.exitcode})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} side sent nothing for {STEP_TIMEOUT_S} s")
        message: dict[str, Any] = self.conn.recv()
        if message["kind"] != kind:
            raise RuntimeError(f"{self.name} side sent {message['kind']!r}, expected {kind!r}")
        return message

    def step(self) -> dict[str, Any]:
        self.conn.send("go")
        return self.expect("step")

    def close(self) -> None:
        self.process.join(timeout=60)
        if self.process.is_alive():
            self.process.kill()


def run_pair(config: RunConfig, *, verbose: bool) -> dict[str, SideResult]:
    """Both sides on `config`, alternating steps; returns each side's reports."""
    context = mp.get_context("spawn")
    children = [Child(context, name, config) for name in SIDES]
    results = {child.name: SideResult() for child in children}
    try:
        for child in children:
            results[child.name].ready = child.expect("ready")
        for i in range(config.total_steps):
            order = children if i % 2 == 0 else children[::-1]
            for child in order:
                results[child.name].steps.append(child.step())
            ours, theirs = (results[name].steps[-1]["prompts"] for name in SIDES)
            if ours != theirs:
                raise RuntimeError(f"step {i + 1}: the sides trained on different prompts")
            if verbose:
                pair = "  ".join(
                    f"{c.name} {results[c.name].steps[-1]['seconds']:.3f}s" for c in children
                )
                print(f"  {config.name} step {i + 1}: {pair}", flush=True)
        for child in children:
            results[child.name].done = child.expect("done")
    finally:
        for child in children:
            child.close()
    return results


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

    from grpo.data import load_examples
    from grpo.data_spec import DataSpec
    from grpo.evaluate import greedy_accuracy
    from grpo.models import load_policy

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


def model_directories(args: argparse.Namespace) -> dict[str, str]:
    """Local directory of each configuration's built-in model, created on first use
    (--model-dir replaces builtin:tiny-arith)."""
    from grpo.cli import cache_dir
    from grpo.models import resolve_model_path

    names = {CONFIGS[name].model for name in [*args.configs, *args.learning_configs]}
    dirs = {
        name: resolve_model_path(name, cache_dir(args.cache_dir), progress=True) for name in names
    }
    if args.model_dir:
        dirs["builtin:tiny-arith"] = str(args.model_dir)
    return dirs


def versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in ("trl", "transformers", "torch", "accelerate"))


def revision() -> str:
    """The commit measured, and whether grpo/ differs from it."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (
        " with uncommitted grpo/ changes" if git("status", "--porcelain", "grpo") else ""
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS), help="timed ones"
    )
    parser.add_argument("--steps", type=int, default=40, help="timed steps per side (default 40)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed first steps (default 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads per side (default 1: the sides alternate, and on a shared 2-core "
        "machine 2 OpenMP threads stall whenever one is descheduled)",
    )
    parser.add_argument(
        "--learning-rate", type=float, default=2e-4, help="both sides (default 2e-4, the demo's)"
    )
    parser.add_argument("--beta", type=float, default=0.04, help="KL coefficient (default 0.04)")
    parser.add_argument("--num-generations", type=int, default=8, help="G (default 8)")
    parser.add_argument("--prompts-per-step", type=int, default=8, help="B (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the timing runs")
    parser.add_argument("--learning", action="store_true", help="also compare learning (long)")
    parser.add_argument("--learning-steps", type=int, default=50, help="(default 50)")
    parser.add_argument(
        "--learning-configs",
        nargs="+",
        choices=list(CONFIGS),
        default=["short"],
        help="configurations of --learning (default short: the warm-up taught bare prompts)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="of --learning")
    parser.add_argument(
        "--model-dir", type=Path, help="use this local model instead of builtin:tiny-arith"
    )
    parser.add_argument("--cache-dir", type=Path, help="built-in models cache (as `grpo train`)")
    parser.add_argument(
        "--trl-cache",
        choices=["dynamic", "static"],
        default="static",
        help="TRL's KV cache in generate (default static; dynamic, TRL's own default, gave "
        "the same ratios here: see bench/README.md)",
    )
    parser.add_argument("--verbose", action="store_true", help="print every step's times")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    try:
        import trl  # noqa: F401
    except ImportError:
        print("bench/vs_trl.py needs TRL: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    args.model_dirs = model_directories(args)
    trl_generation: tuple[tuple[str, Any], ...] = ()
    if args.trl_cache == "static":
        trl_generation = (("cache_implementation", "static"),)
    base = RunConfig(
        name="",
        model_dir="",
        prompt_template=SHORT_TEMPLATE,
        prompts_per_step=args.prompts_per_step,
        num_generations=args.num_generations,
        max_completion_length=16,
        beta=args.beta,
        learning_rate=args.learning_rate,
        seed=args.seed,
        total_steps=1,
        threads=args.threads,
        trl_generation_kwargs=trl_generation,
    )
    models = ", ".join(f"{k} at {v}" for k, v in args.model_dirs.items())
    print(f"GRPO Service {revision()} vs TRL GRPOTrainer ({versions()}); models {models}")
    print(
        f"fp32 on CPU, {args.threads} torch thread(s) per side, {os.cpu_count()} CPUs, "
        f"sides alternate step by step; G={args.num_generations}, "
        f"prompts/step={args.prompts_per_step} (medium: 4), beta={args.beta}, "
        f"lr={args.learning_rate}, TRL cache {args.trl_cache}; load average at start {load_text()}",
        flush=True,
    )
    ratios = timing_section(args, base)
    if args.learning:
        learning_section(args, base)

    def pick(key: str) -> str:
        return " ".join(
            f"{name}={ratios[name][key]:.2f}" if name in ratios else f"{name}=n/a"
            for name in CONFIGS
        )

    print(f"vs TRL: step time ratio {pick('s/step')}; peak memory growth ratio {pick('growth')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
