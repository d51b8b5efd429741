"""Held-out eval on the run page: the eval curve beside the training reward (from step 0,
before training), the table of one evaluated step's examples, an example's history across
evaluations, evaluations arriving live over the run's stream; the final model downloaded
from the Export menu; a long run's eval curve keeping every evaluation when its dense curves
are thinned; the compare page overlaying runs' eval curves."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import CHART_JS, chart_points
from tests.fixtures.browser import Console
from tests.runs import finish, long_spec, small_spec, stop, submit
from tests.stack import ROOT, Stack

EVAL_SERIES_JS = f"""() => {{
  const chart = ({CHART_JS})('chart-eval');
  return (chart?.getOption()?.series || []).map((s) => s.id);
}}"""
EVAL_STEPS_JS = f"""() => {{
  const chart = ({CHART_JS})('chart-eval');
  const source = chart?.getOption()?.dataset?.[0]?.source;
  const accuracy = source?.['eval/accuracy'] || [];
  return (source?.step || []).filter((step, i) => accuracy[i] != null);
}}"""
COMPARE_JS = f"""() => {{
  const chart = ({CHART_JS})('compare-eval-accuracy');
  return (chart?.getOption()?.series || []).map((s) => [s.name, s.data.map(([step]) => step)]);
}}"""
EVAL = {"every_steps": 2, "max_examples": 6}
MAX_POINTS = 1000  # app/static/js/sampling.js: what a thinned curve keeps of a dense metric


PAGE_STATE_JS = f"""() => {{
  const card = document.getElementById('card-eval');
  const rect = card?.getBoundingClientRect();
  const steps = (id) => ({CHART_JS})(id)?.getOption()?.dataset?.[0]?.source?.step?.length;
  return {{
    eval_chart_steps: steps('chart-eval'),
    reward_chart_steps: steps('chart-reward'),
    stream: document.getElementById('stream-state')?.dataset.state,
    rendered_steps: document.getElementById('page')?.dataset.renderedSteps,
    eval_card: card ? {{ hidden: card.hidden, top: rect.top, height: rect.height }} : null,
    viewport: window.innerHeight,
  }};
}}"""


def wait_for_evals(page: Any, api: httpx.Client, run_id: str, count: int, timeout: float) -> None:
    """Until the eval curve holds `count` evaluations; on timeout, fails with what the page
    and the API held then: whether the stream, the page's steps or the chart itself lagged
    (the chart it was, when its observer read only the first of two entries)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(page.evaluate(EVAL_STEPS_JS)) >= count:
            return
        time.sleep(0.25)
    stored = api.get(f"/api/runs/{run_id}/evals").json()["items"]
    run = api.get(f"/api/runs/{run_id}").json()
    raise AssertionError(
        f"the eval curve holds {page.evaluate(EVAL_STEPS_JS)}, wanted {count} evaluations; "
        f"page {page.evaluate(PAGE_STATE_JS)}; API: step {run['step']}, {run['status']}, "
        f"{len(stored)} evaluations stored"
    )


def eval_spec(name: str, **overrides: Any) -> dict[str, Any]:
    knobs = {"max_steps": 4, "save_steps": 0, "max_completion_length": 6, "learning_rate": 3e-4}
    return small_spec(name=name, model="builtin:tiny-arith", eval=EVAL, **{**knobs, **overrides})


def test_eval_curve_table_and_history(
    page: Any, ui_api: httpx.Client, console: Console, shoot: Callable[[Any, str], None]
) -> None:
    run = finish(ui_api, submit(ui_api, eval_spec("browser-eval"))["id"])
    stored = ui_api.get(f"/api/runs/{run['id']}/evals", params={"examples": True}).json()["items"]
    assert [row["step"] for row in stored] == [0, 2, 4]

    page.goto(f"/runs/{run['id']}")
    expect(page.locator("#card-eval")).to_be_visible()
    page.wait_for_function(f"() => ({EVAL_SERIES_JS})().includes('eval/accuracy')")
    assert {"reward", "eval/reward", "eval/accuracy"} <= set(page.evaluate(EVAL_SERIES_JS))
    assert page.evaluate(EVAL_STEPS_JS) == [0, 2, 4]  # the curve starts before training

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


def test_evaluations_arrive_live_over_the_runs_stream(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    spec = long_spec(name="browser-eval-live", eval={"every_steps": 2, "max_examples": 4})
    run = submit(ui_api, spec)
    try:
        page.goto(f"/runs/{run['id']}")
        # the worker may still be starting (torch loads in seconds to minutes)
        page.wait_for_function(f"() => ({EVAL_STEPS_JS})().length > 0", timeout=300_000)
        seen = page.evaluate(EVAL_STEPS_JS)
        assert seen[0] == 0
        # no reload from here: two more evaluations reach the curve and the table live
        more = len(seen) + 2
        wait_for_evals(page, ui_api, run["id"], more, timeout=120)
        page.wait_for_function(
            f"() => document.querySelectorAll('#eval-step option').length >= {more}",
            timeout=60_000,
        )
        assert page.evaluate(EVAL_STEPS_JS)[:more] == [2 * i for i in range(more)]
    finally:
        stop(ui_api, run["id"])
    assert console.unexpected() == []


def test_a_long_runs_eval_curve_keeps_every_evaluation(
    page: Any, ui_api: httpx.Client, ui_stack: Stack, console: Console
) -> None:
    """3,000 steps are thinned to the train reward's extremes; the 60 evaluations among them
    are all drawn (thinned the same way, all but a few were lost)."""
    steps, every = 3_000, 50
    spec = small_spec(name="browser-eval-long", max_steps=steps, resources={"queue": "parked"})
    run = submit(ui_api, spec)
    seed = [sys.executable, "-m", "tests.seed", "into", run["id"], str(steps), str(every)]
    subprocess.run(seed, cwd=ROOT, env=ui_stack.env, check=True)
    ui_api.post(f"/api/runs/{run['id']}/cancel")
    page.goto(f"/runs/{run['id']}")
    page.wait_for_function(f"() => ({EVAL_STEPS_JS})().length > 0", timeout=60_000)
    assert page.evaluate(EVAL_STEPS_JS) == list(range(every, steps + 1, every))
    reward = chart_points(page, "chart-eval", "reward")
    assert reward[-1][0] == steps and len(reward) <= MAX_POINTS + steps // every
    assert console.unexpected() == []


def test_compare_overlays_eval_curves(
    page: Any, ui_api: httpx.Client, console: Console, shoot: Callable[[Any, str], None]
) -> None:
    runs = [
        finish(ui_api, submit(ui_api, eval_spec(f"browser-eval-lr-{lr}", learning_rate=lr))["id"])
        for lr in (3e-4, 1e-3)
    ]
    ids = ",".join(r["id"] for r in runs)
    page.goto(f"/compare?runs={ids}&metrics=eval/accuracy,reward")
    expect(page.locator("#compare-eval-accuracy")).to_be_visible()
    page.wait_for_function(f"() => ({COMPARE_JS})().length === 2")
    assert page.evaluate(COMPARE_JS) == [[r["name"], [0, 2, 4]] for r in runs]
    page.locator("#compare-eval-accuracy").scroll_into_view_if_needed()
    shoot(page, "compare-eval")
    assert console.unexpected() == []
