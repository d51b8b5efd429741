"""A run's prepared tools: their schemas for the chat template, and the calls of a turn run
in parallel across trajectories (bounded). A call that fails in any way (unknown tool, bad
arguments, the tool raising, a sandbox limit) is answered with an error message the model
reads; it never fails the step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from grpo.spec.tools import ToolSpec
from grpo.tools.calls import ToolCall
from grpo.tools.kind import Tool, ToolRunFacts
from grpo.tools.registry import tool_kind_of
from grpo.tools.trajectory import ToolResult


class Toolbox:
    """The tools of a spec's entries, prepared once per run on the worker."""

    def __init__(
        self, entries: Sequence[ToolSpec], run: ToolRunFacts, *, max_result_chars: int
    ) -> None:
        self.tools: dict[str, Tool] = {}
        self.environment: Callable[[], Any] | None = None
        for entry in entries:
            prepared = tool_kind_of(entry).prepare(entry, run)
            for tool in prepared.tools:
                if tool.name in self.tools:
                    raise ValueError(f"two tools are named {tool.name!r}: rename one (`label`)")
                self.tools[tool.name] = tool
            self.environment = prepared.environment or self.environment
        self.max_result_chars = max_result_chars

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema for tool in self.tools.values()]

    def checked(self, call: ToolCall) -> ToolCall:
        """The call, with an error when it names no tool of this run (a name the model made
        up is never a metric key: tools/invalid/calls counts it)."""
        if call.error is None and call.name not in self.tools:
            names = ", ".join(self.tools) or "none"
            return replace(call, error=f"no tool {call.name!r} (tools: {names})")
        return call

    def call(self, call: ToolCall, environment: Any) -> ToolResult:
        """One call's result; every failure becomes an error result naming what went wrong."""
        started = time.perf_counter()
        call = self.checked(call)
        if call.error is not None:
            return ToolResult(call.name, f"Error: {call.error}", True)
        tool = self.tools[call.name]
        try:
            content, is_error = str(tool.call(call.arguments, environment)), False
        except Exception as exc:  # the tool's failure is the model's to read
            content, is_error = f"Error: {type(exc).__name__}: {exc}", True
        if len(content) > self.max_result_chars:
            content = content[: self.max_result_chars] + " [cut at max_tool_result_chars]"
        return ToolResult(call.name, content, is_error, time.perf_counter() - started)

    def run_per_trajectory(
        self, calls: Sequence[tuple[Sequence[ToolCall], Any]], *, concurrency: int
    ) -> list[list[ToolResult]]:
        """Each trajectory's calls of a turn, trajectories in parallel (bounded), a
        trajectory's own calls one after the other (its environment sees them in order)."""

        def run_one(job: tuple[Sequence[ToolCall], Any]) -> list[ToolResult]:
            return [self.call(c, job[1]) for c in job[0]]

        if concurrency <= 1 or len(calls) <= 1:
            return [run_one(job) for job in calls]
        with ThreadPoolExecutor(max_workers=min(concurrency, len(calls))) as pool:
            return list(pool.map(run_one, calls))
