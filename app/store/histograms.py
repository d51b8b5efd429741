"""Each step's fixed-bin histograms read back, for the heatmaps over training and exports.

They are written with the step's scalars (steps.save_step); the bins are grpo/report/'s,
fixed so that steps and runs compare. Steps written before a histogram existed hold [].
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Select, Text, cast, select

from app.store.models import StepMetric
from app.store.steps import last_event_id
from grpo.report import ADVANTAGE_BIN_EDGES, GROUP_REWARD_STD_BIN_EDGES, REWARD_BIN_EDGES

BIN_EDGES: dict[str, tuple[float, ...]] = {
    "advantage_histogram": ADVANTAGE_BIN_EDGES,
    "reward_histogram": REWARD_BIN_EDGES,
    "group_reward_std_histogram": GROUP_REWARD_STD_BIN_EDGES,
}
"""Histogram name (the column and JSON key) -> its bin edges."""
COLUMNS = [getattr(StepMetric, name) for name in BIN_EDGES]


def list_histograms(
    conn: Connection, run_id: str, *, after_step: int = 0, limit: int = 100_000
) -> list[dict[str, Any]]:
    """{step, advantage_histogram, reward_histogram, group_reward_std_histogram} in step order."""
    stmt = _select(run_id, COLUMNS, after_step=after_step, limit=limit)
    rows = conn.execute(stmt).all()
    return [{"step": row[0], **dict(zip(BIN_EDGES, row[1:], strict=True))} for row in rows]


def histograms_json(
    conn: Connection,
    run_id: str,
    *,
    after_step: int = 0,
    limit: int = 100_000,
    after_event: int | None = None,
) -> str:
    """The histograms list as a JSON document, spliced from the stored JSON text unparsed
    (as steps.metrics_json: a 10,000-step run is read whole by the heatmaps)."""
    stmt = _select(
        run_id, [cast(column, Text) for column in COLUMNS], after_step=after_step, limit=limit
    )
    if after_event is None:  # before the rows: a resumed stream repeats, never skips
        after_event = last_event_id(conn, run_id)
    rows = conn.execute(stmt).all()
    items = ",".join(_row_json(row[0], row[1:]) for row in rows)
    edges = json.dumps({name: list(e) for name, e in BIN_EDGES.items()}, separators=(",", ":"))
    return f'{{"last_event_id":{after_event},"bin_edges":{edges},"items":[{items}]}}'


def _select(run_id: str, columns: list[Any], *, after_step: int, limit: int) -> Select[Any]:
    return (
        select(StepMetric.step, *columns)
        .where(StepMetric.run_id == run_id, StepMetric.step > after_step)
        .order_by(StepMetric.step)
        .limit(limit)
    )


def _row_json(step: int, texts: Sequence[str]) -> str:
    fields = (f'"{name}":{text}' for name, text in zip(BIN_EDGES, texts, strict=True))
    return f'{{"step":{step},{",".join(fields)}}}'
