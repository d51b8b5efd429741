"""Held-out eval on the run page: the eval curve beside the training reward, the table of
one evaluated step's examples, an example's history across evaluations; and the final
model downloaded from the Export menu."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import Console
from tests.browser.runs import finish, small_spec, submit

EVAL_SERIES_JS = """() => {
  const chart = window.echarts.getInstanceByDom(document.getElementById('chart-eval'));
  return (chart?.getOption()?.series || []).map((s) => s.id);
}"""


def test_eval_curve_table_and_history(
    page: Any, api: httpx.Client, console: Console, shoot: Callable[[Any, str], None]
) -> None:
    spec = small_spec(
        name="browser-eval", model="builtin:tiny-arith", max_steps=4, save_steps=0,
        max_completion_length=6, learning_rate=3e-4,
        eval={"every_steps": 2, "max_examples": 6},
    )  # fmt: skip
    run = finish(api, submit(api, spec)["id"])
    stored = api.get(f"/api/runs/{run['id']}/evals", params={"examples": True}).json()["items"]
    assert [row["step"] for row in stored] == [0, 2, 4]

    page.goto(f"/runs/{run['id']}")
    expect(page.locator("#card-eval")).to_be_visible()
    page.wait_for_function(f"() => ({EVAL_SERIES_JS})().includes('eval/accuracy')")
    assert {"reward", "eval/reward", "eval/accuracy"} <= set(page.evaluate(EVAL_SERIES_JS))

    expect(page.locator("#eval-panel")).to_be_visible()
    expect(page.locator("#eval-step")).to_have_value("4")
    rows = page.locator("#eval-table tr.eval-row")
    expect(rows).to_have_count(6)
    first = stored[-1]["examples"][0]
    expect(rows.first).to_contain_text(first["answer"])
    page.select_option("#eval-step", "0")
    expect(rows.first).to_contain_text(stored[0]["examples"][0]["completions"][0])

    rows.first.click()
    points = page.locator("#eval-history .eval-point")
    expect(points).to_have_count(3)
    expect(points.nth(2)).to_contain_text("step 4")
    page.locator("#card-eval").scroll_into_view_if_needed()
    shoot(page, "run-eval-curve")
    page.locator("#eval-panel").scroll_into_view_if_needed()
    shoot(page, "run-eval-table")

    page.locator("#run-head details.menu summary").click()
    with page.expect_download() as info:
        page.get_by_role("link", name="Model · latest checkpoint (.tar.gz)").click()
    assert info.value.suggested_filename == f"{run['id']}-step-000004.tar.gz"
    assert console.unexpected() == []
