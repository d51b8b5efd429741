"""A built-in's first-use build, said while it goes (issue 44): builtin:small-arith takes
about 4 minutes and builtin:tiny-tools 6-7 on a busy 2-core machine, and a run's page that
says nothing for that long looks stuck. The warm-ups call a `BuildProgress` after each
step; it tells the trainer's log (the run's log lines on the service, `[info]` lines in
`grpo train`'s terminal, above its tqdm bar) how far the build is, at most every
`every_s` seconds and once more at its end (`finish`). Knows nothing of GRPO or torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from grpo.spec import FIRST_USE_BUILD

Log = Callable[[str, str], None]
"""(level, message): the trainer's log."""
EVERY_S = 10.0
"""Seconds between two progress lines of one build."""


def first_use_cost(name: str) -> str:
    """`first use, about 4 min here`: what the build line says it will take."""
    cost = FIRST_USE_BUILD.get(name)
    return f"first use, {cost} here" if cost else "first use"


def elapsed(seconds: float) -> str:
    """`2 min 05 s`, `42 s`."""
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


class BuildProgress:
    """Progress lines of one build: `building builtin:small-arith (first use, about 4 min
    here): 40%, step 360 of 900, held-out accuracy 0.21 (done at 0.32); 1 min 32 s so far`."""

    def __init__(
        self,
        name: str,
        log: Log | None,
        *,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.log, self.every_s, self.clock = name, log, every_s, clock
        self.started = self.last = clock()

    def __call__(self, done: int, total: int, detail: str = "") -> None:
        """`done` of `total` units (steps, phases) are done; a line if `every_s` passed since
        the last one, or when the last unit is."""
        if self.log is None:
            return
        now = self.clock()
        if now - self.last < self.every_s and done < total:
            return
        self.say(now, 100 * done // max(total, 1), detail)

    def finish(self, detail: str = "") -> None:
        """The last line, at 100%, whenever the work ends (a warm-up that stops early)."""
        self.say(self.clock(), 100, detail)

    def say(self, now: float, percent: int, detail: str) -> None:
        if self.log is None:
            return
        self.last = now
        more = f", {detail}" if detail else ""
        self.log(
            "info",
            f"building {self.name} ({first_use_cost(self.name)}): {percent}%{more}; "
            f"{elapsed(now - self.started)} so far",
        )
