"""bench/gpu_check.py runs end to end on the CPU with a tiny model (the GPU path itself is
measured only where a CUDA device is; see bench/README.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_trains_a_tiny_qwen2_with_micro_batches_and_reports_each_phase() -> None:
    args = "--tiny --device cpu --precision fp32 --steps 2 --prompts 2 --generations 4"
    command = [sys.executable, "bench/gpu_check.py", *args.split()]
    command += ["--completion-tokens", "8", "--micro-batch", "3", "--sides", "ours"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"gpu_check: ours: \d+\.\d{3} s/step \(median of 1\), tokens/s by phase: "
        r"generate \d+, reference \d+, reward \d+, step \d+, train \d+; peak memory \d+\.\d\d GiB",
        last,
    ), last
