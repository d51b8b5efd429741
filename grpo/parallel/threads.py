"""Threads that fit the machine: how many intra-op threads torch uses in a process that
trains, and how its OpenMP threads wait.

torch starts one intra-op thread per core it sees and lets OpenMP spin while they wait
for work. Next to other busy processes (a shared host, a second worker) that is the worst
case: a parallel region waits for its slowest thread, a thread that lost its core to
another process keeps the others spinning, and a step of the demo took 55x longer next to
one busy Python process than alone (issue 30; bench/threads.py). So a process that trains
uses as many threads as the devices it holds give it (its CPU slots on a CPU worker, a few
on a GPU worker, whose host only feeds the device) and a passive wait policy (a thread
that waits sleeps instead of spinning), unless the user set either.

OMP_WAIT_POLICY is read once, when the OpenMP runtime loads with torch: `prefer_passive_wait`
must run before `import torch` (or in the environment of a child process). The thread
count can be set at any time before the first parallel region.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Literal

WAIT_POLICY = "PASSIVE"
"""OpenMP's wait policy for processes that train: waiting threads sleep, not spin."""
GPU_HOST_THREADS = 2
"""Intra-op threads of a process that trains on a GPU: the host only feeds the device
(tokenising, sampling glue, small CPU ops), and more threads contend with the other ranks."""
USER_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Variables through which a user sets the thread count themselves; torch reads them."""


@dataclass(frozen=True)
class ThreadChoice:
    """The intra-op threads a process uses, the OpenMP wait policy, and who chose them."""

    threads: int
    wait_policy: str
    source: str
    """`devices` (chosen from the devices held) or the variable the user set it with."""

    @property
    def label(self) -> str:
        by = "from the devices held" if self.source == "devices" else f"from {self.source}"
        plural = "s" if self.threads > 1 else ""
        return f"{self.threads} torch thread{plural} ({by}), OMP_WAIT_POLICY={self.wait_policy}"


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or taskset's share),
    which os.cpu_count() overstates."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def prefer_passive_wait(environ: MutableMapping[str, str] | None = None) -> None:
    """OMP_WAIT_POLICY=PASSIVE unless the user set it; before torch loads (see above)."""
    env = os.environ if environ is None else environ
    env.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)


def threads_for(kind: Literal["cuda", "cpu"], devices: int, *, ranks: int = 1) -> int:
    """Intra-op threads for one of `ranks` processes sharing `devices` of `kind`: the CPU
    slots each rank has (at least 1), or GPU_HOST_THREADS on a GPU."""
    if kind == "cuda":
        return GPU_HOST_THREADS
    return max(1, devices // max(1, ranks))


def user_threads(environ: MutableMapping[str, str] | None = None) -> tuple[int, str] | None:
    """The thread count the user set through OMP_NUM_THREADS or MKL_NUM_THREADS, if any,
    and the variable that set it."""
    env = os.environ if environ is None else environ
    for name in USER_VARIABLES:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value), name
    return None


def apply_threads(kind: Literal["cuda", "cpu"], devices: int, *, ranks: int = 1) -> ThreadChoice:
    """Set torch's intra-op threads for this process, unless the user set them, and say what
    was chosen (for the worker's start line and GET /api/workers)."""
    import torch

    wait_policy = os.environ.get("OMP_WAIT_POLICY", "default")
    chosen = user_threads()
    if chosen is not None:  # torch read it when it loaded
        return ThreadChoice(chosen[0], wait_policy, chosen[1])
    threads = threads_for(kind, devices, ranks=ranks)
    torch.set_num_threads(threads)
    return ThreadChoice(threads, wait_policy, "devices")
