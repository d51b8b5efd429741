"""The tool metrics of a step (issue 28): counted per rank from its trajectories, summed
over ranks, turned into scalars on rank 0.

    tools/calls_per_trajectory   calls per trajectory (malformed ones included)
    tools/failure_rate           share of answered calls whose answer is an error
    tools/<name>/calls           calls of each tool, per trajectory (`invalid`: calls that
                                 could not run as written: unknown tool, bad JSON or
                                 arguments)
    tools/iteration_limit_share  share of trajectories still calling at
                                 max_tool_calling_iterations
    time/tools                   wall seconds the step's tool calls took (rank max)

Trajectories are read by their attributes (grpo/tools/trajectory.py): `calls`, `results`,
`is_at_iteration_limit`. Knows nothing of how tools run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def tool_counts(trajectories: Sequence[Any] | None) -> dict[str, float]:
    """Sums over a rank's trajectories; {} without tools."""
    if trajectories is None:
        return {}
    counts = {"trajectories": float(len(trajectories)), "calls": 0.0, "failures": 0.0,
              "answered": 0.0, "at_limit": 0.0}  # fmt: skip
    for trajectory in trajectories:
        counts["calls"] += len(trajectory.calls)
        counts["answered"] += len(trajectory.results)
        counts["failures"] += sum(r.is_error for r in trajectory.results)
        counts["at_limit"] += float(trajectory.is_at_iteration_limit)
        for call in trajectory.calls:
            key = f"calls/{call.name if call.error is None else 'invalid'}"
            counts[key] = counts.get(key, 0.0) + 1
    return counts


def sum_counts(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0.0) + value
    return total


def tool_scalars(counts: dict[str, float]) -> dict[str, float]:
    """The tools/* scalars of the summed counts; {} without tools."""
    n = counts.get("trajectories", 0.0)
    if not n:
        return {}
    answered = counts["answered"]
    scalars = {
        "tools/calls_per_trajectory": counts["calls"] / n,
        "tools/failure_rate": counts["failures"] / answered if answered else 0.0,
        "tools/iteration_limit_share": counts["at_limit"] / n,
    }
    for key, value in counts.items():
        if key.startswith("calls/"):
            scalars[f"tools/{key.removeprefix('calls/')}/calls"] = value / n
    return scalars
