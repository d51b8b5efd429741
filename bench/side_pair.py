"""Both sides of bench/vs_trl.py in lockstep: one child process each, stepped alternately
by the parent (ours first on even steps, TRL first on odd ones), and what each reported."""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import ours_side
import trl_side
from side_protocol import RunConfig

SIDES = {"ours": ours_side.run, "trl": trl_side.run}
STEP_TIMEOUT_S = 600


@dataclass
class SideResult:
    """What one side reported: setup memory, every step, peak memory, final accuracy."""

    ready: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    done: dict[str, Any] = field(default_factory=dict)

    def timed(self, warmup: int) -> list[dict[str, Any]]:
        return self.steps[warmup:]

    def median_seconds(self, warmup: int) -> float:
        return float(statistics.median(s["seconds"] for s in self.timed(warmup)))

    def quartiles(self, warmup: int) -> tuple[float, float]:
        seconds = [s["seconds"] for s in self.timed(warmup)]
        if len(seconds) < 2:
            return seconds[0], seconds[0]
        q = statistics.quantiles(seconds, n=4)
        return q[0], q[2]

    def tokens_per_second(self, warmup: int) -> float:
        """Completion tokens (EOS included) generated per second, over the timed steps."""
        steps = self.timed(warmup)
        return float(sum(s["tokens"] for s in steps) / sum(s["seconds"] for s in steps))

    def mean_length(self, warmup: int, completions_per_step: int) -> float:
        steps = self.timed(warmup)
        return float(sum(s["tokens"] for s in steps) / (len(steps) * completions_per_step))

    def initial_reward(self, first: int = 10) -> float:
        """Mean training reward of the first `first` steps."""
        head = self.steps[:first]
        return float(sum(s["reward"] for s in head) / len(head))

    def final_reward(self, last: int = 10) -> float:
        """Mean training reward of the last `last` steps."""
        tail = self.steps[-last:]
        return float(sum(s["reward"] for s in tail) / len(tail))


class Child:
    """One side's process and the parent's end of its pipe."""

    def __init__(self, context: Any, name: str, config: RunConfig) -> None:
        self.name = name
        self.conn, child_conn = context.Pipe()
        self.process = context.Process(target=SIDES[name], args=(child_conn, config), daemon=True)
        self.process.start()
        child_conn.close()

    def expect(self, kind: str) -> dict[str, Any]:
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while not self.conn.poll(1.0):
            if not self.process.is_alive():
                raise RuntimeError(f"{self.name} side died (exit code {self.process.exitcode})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} side sent nothing for {STEP_TIMEOUT_S} s")
        message: dict[str, Any] = self.conn.recv()
        if message["kind"] != kind:
            raise RuntimeError(f"{self.name} side sent {message['kind']!r}, expected {kind!r}")
        return message

    def step(self) -> dict[str, Any]:
        self.conn.send("go")
        return self.expect("step")

    def close(self) -> None:
        self.process.join(timeout=60)
        if self.process.is_alive():
            self.process.kill()


def run_pair(config: RunConfig, *, verbose: bool) -> dict[str, SideResult]:
    """Both sides on `config`, alternating steps; returns each side's reports."""
    context = mp.get_context("spawn")
    children = [Child(context, name, config) for name in SIDES]
    results = {child.name: SideResult() for child in children}
    try:
        for child in children:
            results[child.name].ready = child.expect("ready")
        for i in range(config.total_steps):
            order = children if i % 2 == 0 else children[::-1]
            for child in order:
                results[child.name].steps.append(child.step())
            ours, theirs = (results[name].steps[-1]["prompts"] for name in SIDES)
            if ours != theirs:
                raise RuntimeError(f"step {i + 1}: the sides trained on different prompts")
            if verbose:
                pair = "  ".join(
                    f"{c.name} {results[c.name].steps[-1]['seconds']:.3f}s" for c in children
                )
                print(f"  {config.name} step {i + 1}: {pair}", flush=True)
        for child in children:
            results[child.name].done = child.expect("done")
    finally:
        for child in children:
            child.close()
    return results
