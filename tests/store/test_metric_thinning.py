"""A thinned view of a long run's metrics (app/store/thinning.py): the first and the last
row, every row of a sparse metric, each bucket's lowest and highest row of every other
metric, and no more rows than asked."""

from __future__ import annotations

import numpy as np

from app.store.thinning import keep_rows


def extremes_kept(values: np.ndarray, kept: set[int], size: int) -> bool:
    for start in range(0, len(values), size):
        for column in values[start : start + size].T:
            if np.isnan(column).all():
                continue
            if {start + int(np.nanargmin(column)), start + int(np.nanargmax(column))} - kept:
                return False
    return True


def test_each_buckets_extremes_the_ends_and_a_sparse_metric_are_kept() -> None:
    rng = np.random.default_rng(0)
    n = 10_001  # the last bucket is shorter
    values = rng.random((n, 3))
    values[9_999, 1] = 50.0  # a spike in the last bucket
    values[: n // 2, 2] = np.nan  # a metric reported from half-way only
    evals = np.full((n, 1), np.nan)
    evals[::200] = 0.5  # an evaluation every 200 steps: 51 points
    table = np.hstack([values, evals])
    rows, cut = keep_rows(table.copy(), 1000)
    kept = set(rows.tolist())
    assert len(rows) <= 1000 and {0, n - 1} <= kept and 9_999 in kept
    assert set(range(0, n, 200)) <= kept
    assert cut["buckets"] > 100 and cut["bucket_steps"] == -(-n // cut["buckets"])
    assert extremes_kept(values, kept, cut["bucket_steps"])


def test_more_metrics_than_the_rows_allow_keep_one_buckets_extremes_of_each() -> None:
    rng = np.random.default_rng(1)
    values = rng.random((5_000, 40))
    rows, cut = keep_rows(values.copy(), 50)
    assert cut["buckets"] == 1 and len(rows) <= 2 * 40 + 2
    assert extremes_kept(values, set(rows.tolist()), 5_000)
