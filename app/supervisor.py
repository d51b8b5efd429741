"""`grpo up`'s supervisor: keeps the API and the worker running, and stops them together.

A child that exits is started again after a backoff (1 s, doubling to 30 s; back to 1 s
once it ran a minute) with a log line, and the others keep running. When the worker died,
the run it held is requeued at once, not after the stale limit, and resumes from its
checkpoint on the new worker. SIGINT or SIGTERM, once or repeated, to the supervisor or to
its whole process group, stops every child: SIGTERM once (a worker hands its run back at
the next step boundary), SIGKILL past the bound. Children get SIGTERM if the supervisor
itself dies. Knows nothing of HTTP.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MAX_BACKOFF_SECONDS = 30.0
HEALTHY_AFTER_SECONDS = 60.0
"""A child that ran this long before it exited is restarted after the shortest backoff."""


@dataclass
class Child:
    name: str
    argv: list[str]
    on_exit: Callable[[], None] = lambda: None
    """Runs after the child exited, before it is started again."""
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    backoff: float = 1.0


@dataclass
class Supervisor:
    children: list[Child]
    env: dict[str, str]
    cwd: Path
    stop_within: float
    """Seconds from SIGTERM to SIGKILL for children that are still running."""
    is_stopping: bool = field(default=False, init=False)

    def run(self) -> int:
        """Until SIGINT or SIGTERM; returns 0 once every child has ended."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._request_stop)
        for child in self.children:
            self._start(child)
        while not self.is_stopping:
            for child in self.children:
                self._watch(child)
            time.sleep(0.2)
        self._stop_all()
        # Python's exit restores the default handlers, and a signal repeated during it
        # would kill this process with -15: from here on, further stops are moot.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        return 0

    def _request_stop(self, *_: object) -> None:
        if self.is_stopping:
            say(f"already stopping (at most {self.stop_within:.0f} s)")
            return
        self.is_stopping = True
        say("stopping…")

    def _start(self, child: Child) -> None:
        child.process = subprocess.Popen(
            child.argv, env=self.env, cwd=self.cwd, preexec_fn=_die_with_parent
        )
        child.started_at, child.restart_at = time.monotonic(), None

    def _watch(self, child: Child) -> None:
        assert child.process is not None
        now = time.monotonic()
        if child.restart_at is not None:
            if now >= child.restart_at:
                say(f"starting the {child.name} again")
                self._start(child)
            return
        code = child.process.poll()
        if code is None:
            return
        if now - child.started_at >= HEALTHY_AFTER_SECONDS:
            child.backoff = 1.0
        say(f"the {child.name} exited with code {code}; restarting it in {child.backoff:.0f} s")
        try:
            child.on_exit()
        except Exception as exc:  # noqa: BLE001 - a failed clean-up must not stop supervision
            say(f"after the {child.name} exited: {type(exc).__name__}: {exc}")
        child.restart_at = now + child.backoff
        child.backoff = min(MAX_BACKOFF_SECONDS, child.backoff * 2)

    def _stop_all(self) -> None:
        running = [c.process for c in self.children if c.process and c.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_within
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"process {process.pid} still running after {self.stop_within:.0f} s; killed")
                process.kill()
                process.wait()


def say(message: str) -> None:
    print(f"grpo up: {message}", file=sys.stderr, flush=True)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the supervisor dies (Linux prctl)."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1  # noqa: N806 - the kernel's name
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
