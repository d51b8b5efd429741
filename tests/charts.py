"""What a page drew, read back through ECharts' own API (getInstanceByDom / getOption)."""

from __future__ import annotations

import time
from typing import Any

CHART_JS = """(id) => {
  const el = document.getElementById(id);
  return el && window.echarts ? window.echarts.getInstanceByDom(el) : null;
}"""
"""JS: the ECharts instance of element `id`, or null while the page has not built it (neither
the element nor the library may be there yet; getInstanceByDom(null) throws, and a throw ends
a wait_for_function at once instead of waiting). Snippets call it as `({CHART_JS})(id)`."""

CHART_POINTS_JS = f"""([id, key]) => {{
  const chart = ({CHART_JS})(id);
  if (!chart) return null;
  const source = chart.getOption()?.dataset?.[0]?.source;
  if (!source || !source[key]) return [];
  return source.step.map((s, i) => [s, source[key][i]]).filter(([, v]) => v !== null);
}}"""


def chart_points(page: Any, chart_id: str, key: str) -> list[list[float]]:
    """[step, value] pairs a run-page curve holds for one metric."""
    return list(page.evaluate(CHART_POINTS_JS, [chart_id, key]) or [])


def wait_points(
    page: Any, chart_id: str, key: str, at_least: int, timeout: float = 240
) -> list[Any]:
    deadline = time.monotonic() + timeout
    points: list[Any] = []
    while time.monotonic() < deadline:
        points = chart_points(page, chart_id, key)
        if len(points) >= at_least:
            return points
        time.sleep(0.25)
    raise TimeoutError(f"{chart_id}/{key} has {len(points)} points, wanted {at_least}")
