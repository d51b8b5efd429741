"""The step-time chart shows the reward phase of each reward label (time/reward/<label>)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.charts import wait_points
from tests.fixtures.browser import Console


def test_step_time_chart_draws_each_labels_reward_phase(
    page: Any, ui_api: httpx.Client, finished_run: dict[str, Any], console: Console
) -> None:
    run_id, steps = finished_run["id"], finished_run["spec"]["max_steps"]
    metrics = ui_api.get(f"/api/runs/{run_id}/metrics").json()["items"]
    page.goto(f"/runs/{run_id}")
    # charts below the fold are drawn when scrolled to, as a reader would
    page.locator("#chart-time").scroll_into_view_if_needed()
    for label in ("accuracy", "regex"):
        points = wait_points(page, "chart-time", f"time/reward/{label}", steps, timeout=60)
        assert points == [[m["step"], m["metrics"][f"time/reward/{label}"]] for m in metrics]
    assert console.unexpected() == []
