"""Our GRPO trainer against TRL's GRPOTrainer: the same model, prompts, reward and knobs.

    .venv/bin/python bench/vs_trl.py                 (three configurations, 40 timed steps)
    .venv/bin/python bench/vs_trl.py --learning      (+ reward after 50 steps, 3 seeds)

Needs TRL (the `bench` extra; never a runtime dependency). Both sides train the same
built-in model from the same local directory (weights and tokenizer through
`from_pretrained`) on the built-in arithmetic prompts in the same order, scored by the same
accuracy reward (grpo.rewards.rules), with identical G, prompts per step, completion length,
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
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from side_protocol import RunConfig  # noqa: E402
from vs_trl_configs import CONFIGS, SHORT_TEMPLATE  # noqa: E402
from vs_trl_report import learning_section, load_text, timing_section  # noqa: E402


def model_directories(args: argparse.Namespace) -> dict[str, str]:
    """Local directory of each configuration's built-in model, created on first use
    (--model-dir replaces builtin:tiny-arith)."""
    from grpo.cli.main import cache_dir
    from grpo.models.loading import resolve_model_path

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
