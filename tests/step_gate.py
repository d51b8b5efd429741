"""A reward endpoint that holds a run mid-step until the test lets it go: a kill lands at a
chosen step however fast or slow the machine, instead of racing the run with steps to spare.
Served with tests/local_http.py's `serving`; the killed-worker tests of
tests/worker/test_worker_resilience.py use it."""

from __future__ import annotations

import json
import threading
import uuid
from typing import ClassVar

from tests.rewards.test_rewards_service import RewardHandler, judge


class StepGate(RewardHandler):
    """A reward endpoint that holds the first request for step N on a path ending in /N until
    the test opens that path: a run waits there, mid-step, for the test's kill, however
    fast the machine (a tiny step takes ~75 ms: a kill timed by polling the run's step
    once landed 30 steps late, so the killed runs needed 100 steps of room)."""

    reached: ClassVar[dict[str, threading.Event]] = {}
    opened: ClassVar[dict[str, threading.Event]] = {}

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        held = int(self.path.rsplit("/", 1)[1])
        if body["step"] == held and not gate(self.path, "reached").is_set():
            gate(self.path, "reached").set()
            gate(self.path, "opened").wait(timeout=300)
        groups = body["groups"]
        try:
            self._answer(200, {"rewards": [[judge(t) for t in g["completions"]] for g in groups]})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the held request of a rank the test killed


def gate(path: str, kind: str) -> threading.Event:
    """The StepGate event `kind` ("reached" or "opened") of `path`."""
    events = StepGate.reached if kind == "reached" else StepGate.opened
    return events.setdefault(path, threading.Event())


def gated_reward(host: str, name: str, *, held_step: int) -> tuple[dict[str, object], str]:
    """A reward from the StepGate at `host` on a path of its own that holds `held_step`,
    and that path."""
    path = f"/{name}-{uuid.uuid4().hex[:6]}/{held_step}"
    return {"name": "http", "url": f"http://{host}{path}", "timeout_s": 300}, path
