"""`grpo vllm-serve` (grpo/cli/vllm_serve.py) finds a built-in this machine has built without
importing torch: vLLM's server, which the command becomes, imports it again, so the 5 s of
CPU it cost were paid twice at every server start (the generation workers start one per
run). The server itself is tests/engines/test_vllm_server.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from grpo.models.loading import builtin_dir
from tests.stack import ROOT

FIND = (
    "import sys; from pathlib import Path; from grpo.cli.vllm_serve import model_directory; "
    "print(model_directory(sys.argv[1], Path(sys.argv[2]))); print('torch' in sys.modules)"
)


def test_a_built_builtin_is_found_without_torch_and_where_grpo_train_loads_it(
    grpo_cache_dir: Path, tmp_path: Path
) -> None:
    built = builtin_dir("builtin:tiny", grpo_cache_dir, progress=False)
    found = subprocess.run(
        [sys.executable, "-c", FIND, "builtin:tiny", str(grpo_cache_dir)],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    assert found.stdout.split() == [str(built), "False"], found.stderr
    # not built yet here: resolved (and built) as grpo train resolves it, torch and all
    fresh = subprocess.run(
        [sys.executable, "-c", FIND, "builtin:tiny", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    assert fresh.stdout.split() == [str(tmp_path / built.name), "True"], fresh.stderr
