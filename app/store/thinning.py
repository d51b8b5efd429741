"""A long run's metrics thinned to what a chart can show: stored steps, never averaged.

GET /api/runs/{id}/metrics answers at most `max_points` rows. A range of more stored steps
is thinned: the first and the last step are kept; every row of a sparse metric (one that
at most max_points / 8 rows have: an evaluation every k steps) is kept; and the steps are
cut into buckets of consecutive steps, of which every other metric keeps the row where it
is lowest and the one where it is highest. A kept row is a stored step as it was written,
with all its metrics: a spike shows in its curve, the curves of one step stay aligned (a
reward band, stacked outcome shares), and nothing drawn is a value no step had. The bucket
count is the largest whose rows fit in max_points (binary search); the answer says it is a
thinned view and of how many steps (`thinned`).

The steps are read once, a batch at a time, into one float column per metric (numpy); the
kept rows are then read again by step and served as stored. Knows nothing of HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, Text, cast, func

from app.store.models import StepMetric
from app.store.steps import last_event_id, metrics_json, step_range

SPARSE_SHARE = 8
"""A metric that at most max_points / SPARSE_SHARE rows have is kept whole (if all sparse
metrics' rows fit in half of max_points)."""
READ_BATCH = 2000
"""Rows fetched from the database at a time while the columns are built."""
KEPT_BATCH = 500
"""Kept steps read back per query (bound parameters)."""

Thinned = dict[str, int]


def thinned_metrics_json(
    conn: Connection,
    run_id: str,
    *,
    after_step: int = -1,
    before_step: int | None = None,
    max_points: int,
    keys: Sequence[str] = (),
    after_event: int | None = None,
) -> str:
    """The run's metrics in (after_step, before_step) as the JSON document GET /metrics
    answers, thinned to at most `max_points` rows when there are more (see above)."""
    if after_event is None:  # before the rows: a resumed stream repeats, never skips
        after_event = last_event_id(conn, run_id)
    total = conn.scalar(step_range([func.count()], run_id, after_step, before_step)) or 0
    if total <= max_points and not keys:
        return metrics_json(conn, run_id, after_step=after_step, before_step=before_step,
                            limit=None, after_event=after_event)  # fmt: skip
    kept: list[int] | None = None
    thinned = "null"
    if total > max_points:
        steps, values = read_columns(conn, run_id, after_step, before_step, total, keys)
        rows, cut = keep_rows(values, max_points)
        kept = steps[rows].tolist()
        thinned = json.dumps({"steps": len(steps), **cut}, separators=(",", ":"))
    items = ",".join(_rows(conn, run_id, after_step, before_step, kept, keys))
    return (
        f'{{"last_event_id":{after_event},"items":[{items}],'
        f'"next_after_step":null,"thinned":{thinned}}}'
    )


def read_columns(
    conn: Connection,
    run_id: str,
    after_step: int,
    before_step: int | None,
    total: int,
    keys: Sequence[str],
) -> tuple[np.ndarray, np.ndarray]:
    """The steps in the range (at most `total`) and their metrics as columns, NaN where a
    step has none (only `keys` when given, else every metric a row has)."""
    stored = [StepMetric.step, cast(StepMetric.metrics, Text)]
    stmt = step_range(stored, run_id, after_step, before_step).order_by(StepMetric.step)
    columns = {key: i for i, key in enumerate(keys)}
    steps = np.zeros(total, dtype=np.int64)
    values = np.full((total, max(len(columns), 8)), np.nan)
    count = 0
    result = conn.execution_options(yield_per=READ_BATCH).execute(stmt.limit(total))
    for batch in result.partitions():
        parsed: list[dict[str, Any]] = json.loads(f"[{','.join(text for _, text in batch)}]")
        steps[count : count + len(batch)] = [step for step, _ in batch]
        for names, start, stop in _runs_of_same_keys(parsed):
            if not keys:
                for name in names:
                    columns.setdefault(name, len(columns))
                if len(columns) > values.shape[1]:
                    wider = np.full((total, len(columns) + 8), np.nan)
                    wider[:, : values.shape[1]] = values
                    values = wider
            picked = [name for name in names if name in columns]
            where = [columns[name] for name in picked]
            rows = parsed[start:stop]
            every = len(picked) == len(names)
            try:  # floats as written (steps.compact_scalars), read in one go
                table = [list(m.values()) if every else [m[k] for k in picked] for m in rows]
                block = np.array(table, dtype=float)
            except (TypeError, ValueError):
                block = np.array([[_number(m[name]) for name in picked] for m in rows])
            values[count + start : count + stop, where] = block
        count += len(batch)
    return steps[:count], np.ascontiguousarray(values[:count, : max(len(columns), 1)])


def _runs_of_same_keys(rows: list[dict[str, Any]]) -> Iterable[tuple[tuple[str, ...], int, int]]:
    """(key names, start, stop) of each run of consecutive rows with the same keys in the
    same order: one for most batches (a run's steps mostly report the same metrics)."""
    start, names = 0, tuple(rows[0]) if rows else ()
    for i in range(1, len(rows)):
        if len(rows[i]) != len(names) or tuple(rows[i]) != names:
            yield names, start, i
            start, names = i, tuple(rows[i])
    if rows:
        yield names, start, len(rows)


def _number(value: Any) -> float:
    return value if type(value) is float else float(value) if isinstance(value, int) else np.nan


def keep_rows(values: np.ndarray, max_points: int) -> tuple[np.ndarray, Thinned]:
    """Indices of the rows a thinned view keeps (sorted) and how it was cut; `values` holds
    one column per metric (NaN: none) and is consumed."""
    n = len(values)
    missing = np.isnan(values)
    is_sparse = n - missing.sum(axis=0) <= max_points // SPARSE_SHARE
    sparse_rows = np.flatnonzero((~missing[:, is_sparse]).any(axis=1))
    fixed = np.array([0, n - 1], dtype=np.intp)
    if is_sparse.any() and len(sparse_rows) <= max_points // 2:
        fixed = np.union1d(fixed, sparse_rows)
        values, missing = values[:, ~is_sparse], missing[:, ~is_sparse]
    low, high = values, values.copy()
    low[missing], high[missing] = np.inf, -np.inf
    buckets, top = 1, max(1, (max_points - len(fixed)) // 2)
    rows = _with_extremes(fixed, low, high, missing, buckets)
    while buckets < top:  # the most buckets whose rows fit: more buckets keep more rows
        middle = (buckets + top + 1) // 2
        more = _with_extremes(fixed, low, high, missing, middle)
        if len(more) <= max_points:
            buckets, rows = middle, more
        else:
            top = middle - 1
    return rows, {"buckets": buckets, "bucket_steps": -(-n // buckets)}


def _with_extremes(
    fixed: np.ndarray, low: np.ndarray, high: np.ndarray, missing: np.ndarray, buckets: int
) -> np.ndarray:
    """`fixed` and, in each of `buckets` runs of consecutive rows (the last may be shorter),
    the row where each column is lowest and the one where it is highest."""
    if not low.shape[1]:
        return fixed
    n, size = len(low), -(-len(low) // buckets)
    whole = n // size * size
    picks = [fixed]
    for start, stop, count in ((0, whole, whole // size), (whole, n, 1)):
        if stop <= start:
            continue
        for table, pick in ((low, np.argmin), (high, np.argmax)):
            block = table[start:stop].reshape(count, -1, table.shape[1])
            at = pick(block, axis=1) + start + (np.arange(count) * (stop - start) // count)[:, None]
            picks.append(at[~np.take_along_axis(missing, at, axis=0)])
    return np.unique(np.concatenate(picks))


def _rows(
    conn: Connection,
    run_id: str,
    after_step: int,
    before_step: int | None,
    steps: list[int] | None,
    keys: Sequence[str],
) -> Iterable[str]:
    """The rows of `steps` (None: every step of the range) as stored, or only `keys`."""
    stored = [StepMetric.step, cast(StepMetric.metrics, Text)]
    base = step_range(stored, run_id, after_step, before_step).order_by(StepMetric.step)
    chunks = [base]
    if steps is not None:
        chunks = [
            base.where(StepMetric.step.in_(steps[i : i + KEPT_BATCH]))
            for i in range(0, len(steps), KEPT_BATCH)
        ]
    for chunk in chunks:
        for step, text in conn.execute(chunk):
            if keys:
                metrics = json.loads(text)
                text = json.dumps({k: metrics[k] for k in keys if k in metrics})
            yield f'{{"step":{step},"metrics":{text}}}'
