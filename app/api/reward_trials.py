"""Run a reward test or a preflight in a scoring process of its own, bounded.

The process (`python -m grpo.rewards.trial_process`) scores as a worker scores a step: the
same reward kinds, sandbox and TRL call, and what this server's Settings allow a worker
(GRPO_REWARD_HOSTS, GRPO_REWARD_TOKEN_ENVS, GRPO_PLUGIN_DIRS, model and data roots). It is
started per request, never imported here (the API stays free of the scoring code), given
MEMORY_MB of address space and TOTAL_SECONDS of wall clock, then killed with its process
group; the results it wrote by then are kept, and what it did not reach is a failure of
kind `timeout` (or `out_of_memory`, `runtime_error` when it died). At most
MAX_CONCURRENT_TRIALS run at once; more is a 429.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from app.api.errors import ApiError
from app.settings import Settings
from grpo.rewards.failure_kinds import FailureKind
from grpo.rewards.trial_report import ScoringJob, ServerPaths

MEMORY_MB = 4096
"""Address space of one scoring process (a `model` reward's classifier must fit)."""
TOTAL_SECONDS = 120.0
"""Wall clock of one test or preflight, start-up included."""
MAX_CONCURRENT_TRIALS = 2
"""Scoring processes at once, over all callers."""
SCORING_MODULE = "grpo.rewards.trial_process"
_running = threading.BoundedSemaphore(MAX_CONCURRENT_TRIALS)


@dataclass(frozen=True)
class Scored:
    """The JSON lines the process wrote, and why it stopped early (None: it finished)."""

    lines: list[dict[str, object]]
    stopped: FailureKind | None
    why: str = ""


def server_paths(settings: Settings) -> ServerPaths:
    """What a worker of this server is allowed, from the same Settings."""
    return ServerPaths(
        reward_hosts=tuple(settings.reward_host_list),
        token_envs=tuple(settings.reward_token_env_list),
        plugin_dirs=tuple(str(p) for p in settings.plugin_dir_list),
        cache_dir=str(settings.resolved_cache_dir),
        datasets_dir=str(settings.datasets_dir),
        local_path_base=str(settings.local_path_base),
        model_roots=tuple(str(p) for p in settings.model_root_list),
        data_roots=tuple(str(p) for p in settings.data_root_list),
    )


def run_scoring(job: ScoringJob) -> Scored:
    """The process's results for `job`; a 429 when MAX_CONCURRENT_TRIALS already run."""
    with _one_of_few():
        process = subprocess.Popen(
            [sys.executable, "-m", SCORING_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its group is killed with it: a sandbox, a plugin's child
        )
        try:
            out, err = process.communicate(job.model_dump_json(), timeout=TOTAL_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, _ = process.communicate()
            why = f"the test ran past its limit of {TOTAL_SECONDS:g} s before reaching this"
            return Scored(_lines(out), "timeout", why)
    if process.returncode == 0:
        return Scored(_lines(out), None)
    last = (err.strip().splitlines() or ["no message"])[-1][:500]
    killed = process.returncode == -signal.SIGKILL or "MemoryError" in last
    kind: FailureKind = "out_of_memory" if killed else "runtime_error"
    return Scored(_lines(out), kind, f"the scoring process ended early ({last})")


@contextmanager
def _one_of_few() -> Iterator[None]:
    if not _running.acquire(blocking=False):
        message = (
            f"{MAX_CONCURRENT_TRIALS} reward tests are running on this server; retry in a "
            "few seconds"
        )
        raise ApiError(429, "busy", message)
    try:
        yield
    finally:
        _running.release()


def _lines(out: str) -> list[dict[str, object]]:
    """Each complete JSON line (a line cut by a kill is dropped)."""
    found = []
    for line in out.splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found
