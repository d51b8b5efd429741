"""Every page renders from the public API with no console error; each view has its own URL.
With GRPO_SCREENSHOT_DIR set, this is also what makes the 1280x800 screenshots in docs/."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from playwright.sync_api import expect

from tests.charts import CHART_JS, wait_points
from tests.fixtures.browser import Console
from tests.runs import finish


def test_every_page_renders_without_console_errors(
    page: Any,
    ui_api: httpx.Client,
    finished_run: dict[str, Any],
    console: Console,
    shoot: Callable[[Any, str], None],
) -> None:
    run_id = finished_run["id"]
    steps = finished_run["spec"]["max_steps"]

    page.goto("/")
    expect(page.locator(f"tr[data-run-id='{run_id}']")).to_be_visible()
    worker = ui_api.get("/api/workers").json()["items"][0]
    held = len(worker["devices"])
    kind = "GPU" if worker["device_kind"] == "cuda" else "CPU slot"
    expect(page.locator(f"li[data-worker='{worker['name']}'] .worker-devices")).to_have_text(
        re.compile(rf"^{held} {kind}")
    )
    shoot(page, "runs")

    page.goto("/runs/new")
    expect(page.locator("#presets .preset").first).to_be_visible()
    shoot(page, "new-run")

    page.goto(f"/runs/{run_id}")
    wait_points(page, "chart-reward", "reward", steps)
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "ended")
    # every chart drawn: a run without `eval` has no held-out eval chart (issue 44)
    expect(page.locator("#page")).to_have_attribute("data-rendered-steps", str(steps))
    expect(page.locator("#card-reward")).to_be_visible()
    expect(page.locator("#card-eval")).to_be_hidden()
    shoot(page, "run")

    page.goto(f"/runs/{run_id}/steps/2")
    expect(page.locator(".scrubber .step-label")).to_contain_text("Step 2 /")
    expect(page.locator("#groups-summary")).to_contain_text("groups")
    page.locator("#scrubber").scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, -60)")
    shoot(page, "run-step")

    page.goto(f"/runs/{run_id}/steps/2/groups/0")
    expect(page.locator("article.completion").first).to_be_visible()
    shoot(page, "group")

    prompt_id = ui_api.get(f"/api/runs/{run_id}/steps/2/groups").json()["items"][0]["prompt_id"]
    page.goto(f"/runs/{run_id}/prompts/{quote(prompt_id, safe='')}")
    expect(page.locator("#occurrences tbody tr").first).to_be_visible()
    shoot(page, "prompt")

    assert console.unexpected() == []


def test_compare_overlays_runs_and_keeps_them_in_the_url(
    page: Any,
    ui_api: httpx.Client,
    finished_run: dict[str, Any],
    console: Console,
    shoot: Callable[[Any, str], None],
) -> None:
    # a clone that changes the learning rate: the same model, rewards and seed
    patch = {"name": "browser-lr-1e-2", "learning_rate": 1e-2}
    cloned = ui_api.post(f"/api/runs/{finished_run['id']}/clone", json={"patch": patch})
    assert cloned.status_code == 201, cloned.text
    other = finish(ui_api, cloned.json()["id"])
    page.goto(f"/compare?runs={finished_run['id']},{other['id']}")
    chart = page.locator("#compare-reward")
    expect(chart).to_be_visible()
    names = page.evaluate(
        f"() => ({CHART_JS})('compare-reward').getOption().series.map((s) => s.name)"
    )
    assert names == [finished_run["name"], other["name"]]
    # the learning rate acts after step 1: both runs draw the same first point, and the later
    # one is dashed so that the earlier one shows between its dashes (issue 44)
    first = ui_api.get(f"/api/runs/{finished_run['id']}/metrics").json()["items"][0]
    again = ui_api.get(f"/api/runs/{other['id']}/metrics").json()["items"][0]
    assert (first["step"], first["metrics"]["reward"]) == (
        again["step"],
        again["metrics"]["reward"],
    )
    styles = page.evaluate(
        f"() => ({CHART_JS})('compare-reward').getOption().series.map((s) => s.lineStyle)"
    )
    assert [s["type"] for s in styles] == ["solid", [6, 6]], styles
    shoot(page, "compare")

    page.locator(f".run-pick[data-run-id='{other['id']}'] input").uncheck()
    expect(page).to_have_url(f"/compare?runs={finished_run['id']}")
    assert console.unexpected() == []


def test_unknown_run_shows_a_designed_error(page: Any, console: Console) -> None:
    page.goto("/runs/0000000000000000")
    expect(page.locator(".state-error .state-title")).to_have_text("Run not found")
    assert console.unexpected(allowed=("status of 404",)) == []
