"""Shared test fixtures: where built-in models live, and torch's thread count; the fixture
plugins of tests/fixtures/ (the real service, the browser, a tiny model), for every folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from grpo.parallel.threads import prefer_passive_wait
from grpo.run.local import cache_dir

pytest_plugins = [
    "tests.fixtures.service",  # the real service: pg_stack, embedded_stack, stack
    "tests.fixtures.browser",  # Chromium on the service: ui_stack, ui_api, browser, page...
    "tests.fixtures.tiny_model",  # a tiny random model: tokenizer, model
    "tests.budget",  # the suite's CPU budget, checked last
]

# Compiled bytecode is cached (__pycache__) by this process and every one the suite starts,
# even where the shell exports PYTHONDONTWRITEBYTECODE (this machine's does): compiling every
# module from source in each process cost a third of a service test's CPU
# (docs/how-to/development.md).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# OpenMP threads that wait sleep instead of spinning, in pytest's processes and every one they
# start, before any of them loads torch: what grpo/parallel/threads.py gives each process that
# trains, for the reason it gives (a parallel region next to busy processes: the demo's step
# 55x slower). tests/training/test_update.py, ~6 s of CPU alone, used 57 s and 88 s in two
# clean-clone runs while a thread of its worker (born during an in-process vLLM engine's
# tests) burned CPU: likely such a spinning thread (docs/how-to/development.md).
assert "torch" not in sys.modules, "OMP_WAIT_POLICY is read when torch loads"
prefer_passive_wait()

# Every vLLM engine a test starts gets the KV cache its spec needs
# (grpo/engines/vllm.py kv_cache_bytes), not 30% of the machine's memory; with an explicit
# size and vllm_enforce_eager, vLLM also skips its warm-up. (vLLM's CPU CI mode,
# VLLM_CPU_CI_ENV=1, started faster but traced at the first generation: it made
# tests/engines/test_vllm_engine.py 60 s against 41 s. Tests that only need an engine set
# vllm_enforce_eager: ~5 s a start against ~19 s with vLLM's inductor compile.)


@pytest.fixture(scope="session")
def grpo_cache_dir() -> Path:
    """The model cache (GRPO_CACHE_DIR or ~/.cache/grpo), shared across runs: the
    tiny-arith warm-up is built once per machine, as the CLI would."""
    return cache_dir()


@pytest.fixture(scope="session")
def one_torch_thread() -> None:
    """Tiny-model ops are too small for intra-op threads to pay off, and on a shared 2-core
    runner a second spinning thread made each matmul ~15x slower (measured)."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def small_tokenizer(grpo_cache_dir: Path) -> Any:
    """builtin:small's tokenizer (32k byte-level BPE, ChatML template), loaded as a hub one."""
    from transformers import AutoTokenizer

    from grpo.models.loading import builtin_dir

    return AutoTokenizer.from_pretrained(
        builtin_dir("builtin:small", grpo_cache_dir, progress=False)
    )
