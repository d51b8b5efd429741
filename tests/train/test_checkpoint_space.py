"""A checkpoint that cannot be written for space says "no space left" (torch's own words are
"unexpected pos N vs M"), on a real full filesystem: a small tmpfs mounted in a mount
namespace of the writing process's own (`unshare -rm`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.stack import ROOT

SCRIPT = """
import os, shutil, sys, torch
from pathlib import Path
from grpo.checkpoints.files import save_checkpoint
from grpo.models.loading import load_policy
work, cache = Path(sys.argv[1]), Path(sys.argv[2])
model, tokenizer = load_policy("builtin:tiny", cache_dir=cache, progress=False)
first = save_checkpoint(work, 1, model=model, tokenizer=tokenizer, state={})
size = sum(f.stat().st_size for f in first.rglob("*") if f.is_file())
free = shutil.disk_usage(work).free
with open(work / "filler", "wb") as handle:  # leave room for the weights, not the state
    handle.write(bytes(free - size - (256 << 10)))
try:
    save_checkpoint(work, 2, model=model, tokenizer=tokenizer, state={"optim": torch.ones(1 << 21)})
except BaseException as exc:
    print(type(exc).__name__, exc)
    print("left", sorted(p.name for p in (work / "checkpoints").iterdir()))
"""


def test_a_checkpoint_that_does_not_fit_says_no_space_left(
    tmp_path: Path, grpo_cache_dir: Path
) -> None:
    mount = 'mount -t tmpfs -o size=64m tmpfs "$0" && exec "$@"'
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", mount, str(tmp_path), sys.executable, "-c", SCRIPT,
         str(tmp_path), str(grpo_cache_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    failure, left = done.stdout.strip().splitlines()[-2:]
    assert failure.startswith("OutOfSpace no space left on device"), done.stdout
    assert "checkpoint of step 2" in failure
    assert left == "left ['step-000001']"  # the half-written one is gone, the last one kept
