"""What the benchmark's two sides share: the run description, the pacing protocol, memory.

Each side (our trainer, TRL's GRPOTrainer) trains in its own child process so its peak
memory is its own. The parent paces both step by step over a pipe: a side runs one step
when told "go", reports it, and waits; so the two sides alternate on the same cores and a
burst of load from other processes hits both alike. Imports nothing heavy: the parent
process never loads torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

VLLM_MEMORY_SHARE = 0.1
"""Share of the host's memory each side's vLLM reserves for its KV cache on the CPU (both
sides run at once; the default 0.9/0.3 would not fit two)."""


@dataclass(frozen=True)
class RunConfig:
    """One benchmark configuration, identical for both sides."""

    name: str
    model_dir: str
    """Local directory both sides load with `from_pretrained` (same weights, same tokenizer)."""
    prompt_template: str
    prompts_per_step: int
    num_generations: int
    max_completion_length: int
    beta: float
    learning_rate: float
    seed: int
    total_steps: int
    threads: int
    evaluate: bool = False
    """After the last step, greedy accuracy on the arith test split (same function both sides)."""
    trl_generation_kwargs: tuple[tuple[str, Any], ...] = ()
    """Extra `generation_kwargs` for TRL's generate (its best settings for the machine)."""
    use_vllm: bool = False
    """Our side generates with its colocated vLLM engine (use_vllm)."""
    trl_use_vllm: bool = False
    """TRL's side generates with vLLM, vllm_mode="colocate" (else with transformers)."""

    @property
    def completions_per_step(self) -> int:
        return self.prompts_per_step * self.num_generations


def memory_mb() -> dict[str, float]:
    """Resident set size now and its high-water mark for this process, in MiB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # kB -> MiB
    return {"rss": fields["VmRSS"], "hwm": fields["VmHWM"]}


def reset_peak() -> dict[str, float]:
    """Start the peak-RSS clock here: returns RSS and peak so far (MiB), then resets VmHWM to
    the current RSS (Linux `clear_refs` 5), so a later VmHWM is the peak *after* this point.
    Called once the model is loaded: what a step costs is then the growth over `rss`."""
    before = memory_mb()
    Path("/proc/self/clear_refs").write_text("5")
    return before


def limit_threads(threads: int) -> None:
    """Pin BLAS/OpenMP and torch to `threads` before torch is imported (env) and after."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def quiet() -> None:
    """Silence library warnings and progress bars: the parent owns the terminal."""
    import warnings

    warnings.filterwarnings("ignore")
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


class Pacer:
    """Child end of the pipe: say ready, wait for "go", report each step, report done."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def ready(self, **info: Any) -> None:
        self.conn.send({"kind": "ready", **info})
        self.wait()

    def wait(self) -> None:
        command = self.conn.recv()
        if command != "go":
            raise SystemExit(0)

    def step(
        self,
        *,
        step: int,
        seconds: float,
        tokens: float,
        reward: float,
        prompts: list[str],
        phases: dict[str, float] | None = None,
    ) -> None:
        """`prompts`: the step's prompts, so the parent can check both sides trained on the same."""
        self.conn.send(
            {
                "kind": "step",
                "step": step,
                "seconds": seconds,
                "tokens": tokens,
                "reward": reward,
                "prompts": sorted(set(prompts)),
                "phases": phases or {},
            }
        )

    def done(self, **info: Any) -> None:
        self.conn.send({"kind": "done", **info})
