"""The run page live: curves and the advantage histogram grow while the run trains; a
reload or a server restart mid-run loses no point and doubles none; a long run is drawn
from a thinned history and a zoom reads its window's every step."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import CHART_JS, chart_points, wait_points
from tests.fixtures.browser import Console
from tests.runs import long_spec, small_spec, status_of, stop, submit, wait_for_run
from tests.stack import ROOT, Stack, wait_healthy

ADVANTAGE_BARS_JS = f"""() => {{
  const chart = ({CHART_JS})('chart-advantages');
  const bars = chart?.getOption()?.series?.[0]?.data || [];
  return bars.reduce((n, bar) => n + (bar.value ?? bar), 0);
}}"""


def steps_of(points: list[Any]) -> list[int]:
    return [int(step) for step, _ in points]


def test_curves_and_histogram_grow_live_and_survive_reload(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    run = submit(ui_api, long_spec(name="browser-live"))
    page.goto(f"/runs/{run['id']}")

    first = wait_points(page, "chart-reward", "reward", 1)
    # the step's histogram is drawn once its groups are fetched, after the curve: CI once
    # read it empty a moment after the first point, on a loaded machine
    page.wait_for_function(f"() => ({ADVANTAGE_BARS_JS})() > 0", timeout=30_000)
    grown = wait_points(page, "chart-reward", "reward", len(first) + 1)
    assert steps_of(grown) == sorted(set(steps_of(grown)))
    assert chart_points(page, "chart-kl", "kl"), "the KL curve is empty"

    assert status_of(ui_api, run["id"]) == "running", "the reload must happen mid-run"
    before = len(chart_points(page, "chart-reward", "reward"))
    page.reload()
    after = wait_points(page, "chart-reward", "reward", before + 1)
    assert steps_of(after) == list(range(1, len(after) + 1)), "a reload lost or doubled steps"

    stop(ui_api, run["id"])
    metrics = ui_api.get(f"/api/runs/{run['id']}/metrics").json()["items"]
    final = wait_points(page, "chart-reward", "reward", len(metrics))
    assert final == [[m["step"], m["metrics"]["reward"]] for m in metrics]
    expect(page.locator("#run-head .pill")).to_have_text(re.compile("cancelled", re.I))
    assert console.unexpected() == []


def test_curves_grow_live_below_the_reward_preflights_findings(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    """The preflight's findings list every probe with its scores, in the Doctor card above
    the curves; the card keeps to its share of the screen, so the first row of curves stays
    on it, where charts are drawn live (ci11: with the findings of step 5 beside them the
    card pushed the curves below, where a chart waits to be scrolled to, and the reward
    curve held its first point)."""
    run = submit(ui_api, long_spec(name="browser-preflight-live", reward_preflight_records=3))
    page.goto(f"/runs/{run['id']}")
    # the default arithmetic reward pays an answer repeated or rambling as a reasoned one
    for probe in ("answer_repeated", "very_long"):
        finding = page.locator(f'#doctor [data-finding="reward_hole:total.{probe}@0"]')
        expect(finding).to_be_attached(timeout=300_000)
    page.wait_for_function(
        "Number(document.getElementById('page').dataset.renderedSteps) >= 10", timeout=120_000
    )

    top = page.evaluate("document.getElementById('chart-reward').getBoundingClientRect().top")
    assert top < page.viewport_size["height"], "the reward curve is below the first screen"
    grown = wait_points(page, "chart-reward", "reward", 10, timeout=60)
    assert steps_of(grown) == list(range(1, len(grown) + 1))
    stop(ui_api, run["id"])
    assert console.unexpected() == []


def test_stream_resumes_without_gaps_after_a_server_restart(
    page: Any, ui_api: httpx.Client, ui_stack: Stack, console: Console
) -> None:
    run = submit(ui_api, long_spec(name="browser-restart"))
    page.goto(f"/runs/{run['id']}")
    wait_points(page, "chart-reward", "reward", 2)

    # a crash, not a graceful stop: uvicorn would wait for the open stream to finish
    assert status_of(ui_api, run["id"]) == "running", "the crash must happen mid-stream"
    ui_stack.processes["api"].kill()
    ui_stack.processes["api"].wait(timeout=15)
    page.wait_for_selector('#stream-state[data-state="reconnecting"]', timeout=30_000)
    ui_stack.start_api()
    wait_healthy(ui_stack.url)

    missed = ui_api.get(f"/api/runs/{run['id']}").json()["step"]
    wait_points(page, "chart-reward", "reward", missed + 1, timeout=120)
    stop(ui_api, run["id"])
    last = ui_api.get(f"/api/runs/{run['id']}").json()["step"]
    final = wait_points(page, "chart-reward", "reward", last, timeout=120)
    assert steps_of(final) == list(range(1, last + 1))
    # the dropped connection is the only thing the console may mention
    assert console.unexpected(allowed=("net::ERR_",)) == []


SPREAD_HEATMAP_JS = f"""() => {{
  document.getElementById('chart-spread-heatmap').scrollIntoView({{ block: 'center' }});
  const option = ({CHART_JS})('chart-spread-heatmap')?.getOption();
  const cells = option?.series?.[0]?.data || [];
  if (!cells.length) return null;
  return {{ steps: option.xAxis[0].data, bins: option.yAxis[0].data.length,
           yName: option.yAxis[0].name, xName: option.xAxis[0].name, cells }};
}}"""


def test_finished_run_shows_each_steps_group_reward_spread_after_a_reload(
    page: Any, ui_api: httpx.Client, finished_run: dict[str, Any], console: Console
) -> None:
    run_id, steps = finished_run["id"], finished_run["spec"]["max_steps"]
    page.goto(f"/runs/{run_id}")
    page.wait_for_function(f"({SPREAD_HEATMAP_JS})()?.steps.length === {steps}", timeout=30_000)
    drawn = page.evaluate(SPREAD_HEATMAP_JS)
    assert (drawn["xName"], drawn["yName"]) == ("step", "reward std in group")
    # where it trained, as the worker stored it (a run on ranks: '2 ranks · cpu (gloo)')
    expect(page.locator("#run-head .run-device")).to_have_text(finished_run["device"])

    served = ui_api.get(f"/api/runs/{run_id}/histograms").json()["items"]
    counts = [row["group_reward_std_histogram"] for row in served]
    assert drawn["steps"] == [str(row["step"]) for row in served]
    assert len(counts[0]) == 30
    # the y axis stops one bin above the highest spread any step had (0/1 rewards: 0.5)
    top = max(max(i for i, n in enumerate(row) if n) for row in counts)
    assert drawn["bins"] == min(30, top + 2)
    # one column per step: the colour is the number of groups in each std bin
    cells = {(x, y): groups for x, y, groups in drawn["cells"]}
    assert cells == {(x, y): n for x, row in enumerate(counts) for y, n in enumerate(row) if n}
    assert all(sum(row) == finished_run["spec"]["prompts_per_step"] for row in counts)
    assert console.unexpected() == []


ZOOM_JS = f"""([first, last]) => ({CHART_JS})('chart-reward').dispatchAction(
  {{ type: 'dataZoom', startValue: first, endValue: last }})"""


def test_a_long_run_is_drawn_thinned_and_a_zoom_reads_every_step_of_its_window(
    page: Any, ui_api: httpx.Client, ui_stack: Stack, console: Console
) -> None:
    steps = 3_000  # the page asks for 1,000 rows (sampling.js MAX_POINTS): a thinned history
    run = submit(
        ui_api, small_spec(name="browser-zoom", max_steps=steps, resources={"queue": "parked"})
    )
    seed = [sys.executable, "-m", "tests.seed", "into", run["id"], str(steps)]
    subprocess.run(seed, cwd=ROOT, env=ui_stack.env, check=True)
    ui_api.post(f"/api/runs/{run['id']}/cancel")
    page.goto(f"/runs/{run['id']}")
    page.wait_for_function(
        "performance.getEntriesByName('grpo:history-drawn').length > 0", timeout=120_000
    )
    points = chart_points(page, "chart-reward", "reward")
    assert (points[0][0], points[-1][0]) == (1, steps) and len(points) <= 1000
    assert page.get_attribute("#page", "data-rendered-steps") == str(steps)

    page.evaluate(ZOOM_JS, [1000, 1400])
    # a chart off screen is redrawn once it is back: the Doctor card above it grows as the
    # stored run's findings come in, so the chart is scrolled to while waiting
    page.wait_for_function(
        f"""() => {{
          document.getElementById('chart-reward').scrollIntoView({{ block: 'center' }});
          const source = ({CHART_JS})('chart-reward')?.getOption()?.dataset?.[0]?.source;
          return (source?.step || []).filter((s) => s >= 1000 && s <= 1400).length === 401;
        }}""",
        timeout=60_000,
    )
    window = [s for s, _ in chart_points(page, "chart-reward", "reward") if 1000 <= s <= 1400]
    assert window == list(range(1000, 1401)), "the window is drawn at full resolution"
    # the doctor read the stored run a stretch at a time and says when it is done
    expect(page.locator("#doctor")).to_have_attribute("data-current", "true", timeout=60_000)
    assert console.unexpected() == []


def test_a_queued_run_says_what_it_waits_for_beside_its_status(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    """`waiting_for` (issue 42 item 1): the worker that leaves a run queued says why, and the
    run page shows it beside the status, live, until the run ends; the runs table too."""
    run = submit(ui_api, small_spec(name="browser-waiting", resources={"min_free_memory_gb": 1e5}))
    page.goto(f"/runs/{run['id']}")
    waiting = page.locator("#run-head #run-waiting")
    expect(waiting).to_contain_text("left this run queued: needs 100000 GiB free", timeout=60_000)
    said = ui_api.get(f"/api/runs/{run['id']}").json()["waiting_for"]
    expect(waiting).to_have_text(said)
    page.goto("/")
    expect(page.locator(f"tr[data-run-id='{run['id']}'] .run-waiting")).to_have_text(said)

    page.goto(f"/runs/{run['id']}")
    expect(waiting).to_have_text(said)
    assert ui_api.post(f"/api/runs/{run['id']}/cancel").json()["status"] == "cancelled"
    expect(page.locator("#run-head .pill")).to_have_text(re.compile("cancelled", re.I))
    expect(waiting).to_have_count(0)
    assert console.unexpected() == []


def test_a_status_change_between_the_pages_first_reads_reaches_the_header(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    """The page reads the run beside its history and follows the stream from where the
    history ends, so a change that lands between the two reads is in neither (CI lost a
    worker's `waiting_for` so). Here the run read is answered with the run as submitted, the
    worker having since left it queued; the header must still come to say why."""
    run = submit(ui_api, small_spec(name="browser-race", resources={"min_free_memory_gb": 1e5}))
    said = wait_for_run(ui_api, run["id"], lambda r: bool(r["waiting_for"]), timeout=60)[
        "waiting_for"
    ]
    reads = []

    def as_submitted_once(route: Any) -> None:
        reads.append(route.request.url)
        if len(reads) == 1:
            route.fulfill(json=run)
        else:
            route.continue_()

    page.route(f"**/api/runs/{run['id']}", as_submitted_once)
    page.goto(f"/runs/{run['id']}")
    expect(page.locator("#run-head #run-waiting")).to_have_text(said, timeout=60_000)
    assert len(reads) >= 2, "the header was drawn from a read after the first"
    assert ui_api.post(f"/api/runs/{run['id']}/cancel").json()["status"] == "cancelled"
    assert console.unexpected() == []
