"""bench/cuda_ranks.py, the data-parallel check for a CUDA machine, runs its whole flow on
the CPU with gloo (`--device cpu`), so it still works when a GPU is next lent."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cuda_ranks_runs_its_flow_on_gloo_and_finds_the_ranks_equal_to_one_process() -> None:
    command = [sys.executable, "bench/cuda_ranks.py", "--device", "cpu"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    found = re.fullmatch(
        r"cuda_ranks: gloo=ok ddp samples_identical=(\S+) max_weight_diff=(\S+) "
        r"fsdp samples_identical=(\S+) max_weight_diff=(\S+) resume=ok",
        last,
    )
    assert found, last
    ddp_same, ddp_diff, fsdp_same, fsdp_diff = map(float, found.groups())
    assert ddp_same == fsdp_same == 1.0
    assert ddp_diff < 1e-5 and fsdp_diff < 1e-5
    assert "resumed the 2-rank ddp checkpoint on 1 process: steps [3]" in done.stdout
