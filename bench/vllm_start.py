"""What sizing the CPU KV cache saves: an engine start with the cache the spec needs
(grpo/engines/vllm.py kv_cache_bytes) against vLLM's own CPU default (30% of the machine's
memory, measured by a warm-up pass), each start in a fresh child process, the two
alternating.

    .venv/bin/python bench/vllm_start.py               (3 starts of each)
    .venv/bin/python bench/vllm_start.py --repeats 5

The spec is bench/vllm_step.py's (builtin:small, bf16, 8 prompts x 8 completions, 64 + 256
tokens), with vllm_enforce_eager (no inductor compile, which would dominate the start).
A start is the TrainingLoop's construction: model load, the engine's weights copy and vLLM's
start. Memory is the child's RSS growth over its own baseline before the TrainingLoop.
VLLM_CPU_KVCACHE_SPACE is removed from the children's environment (it overrides both).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, tempfile, time
from pathlib import Path
import psutil
import grpo.engines.vllm as engine
if sys.argv[1] == "default":
    engine.kv_cache_bytes = lambda *args, **kwargs: None  # vLLM's own CPU sizing
from grpo.cli.main import cache_dir
from grpo.spec import JobSpec
from grpo.training.trainer import TrainingLoop
spec = JobSpec(model="builtin:small", use_vllm=True, device="cpu", precision="bf16",
               prompts_per_step=8, num_generations=8, beta=0.0, max_prompt_length=64,
               max_completion_length=256, save_steps=0, vllm_enforce_eager=True)
process = psutil.Process()
base, tick = process.memory_info().rss, time.perf_counter()
with tempfile.TemporaryDirectory() as workdir:
    trainer = TrainingLoop(spec, workdir=Path(workdir), cache_dir=cache_dir(None))
    seconds, grown = time.perf_counter() - tick, process.memory_info().rss - base
    trainer.engine.close()
print("RESULT " + json.dumps({"seconds": seconds, "mib": grown / 2**20}))
"""


def start(kind: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind], cwd=ROOT, env=env, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, float] = json.loads(line.removeprefix("RESULT "))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"sized": [], "default": []}
    for repeat in range(args.repeats):
        for kind in ("sized", "default") if repeat % 2 == 0 else ("default", "sized"):
            runs[kind].append(start(kind))
            print(f"{kind}: {runs[kind][-1]}", flush=True)
    for kind, results in runs.items():
        seconds = [r["seconds"] for r in results]
        mib = [r["mib"] for r in results]
        print(
            f"{kind}: start {statistics.median(seconds):.1f} s ({min(seconds):.1f}-"
            f"{max(seconds):.1f}), RSS growth {statistics.median(mib):.0f} MiB "
            f"({min(mib):.0f}-{max(mib):.0f}); load average {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
