"""The runs page: the demo is the first thing offered and one click trains it live; the
table filters, searches and acts on runs."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import chart_points, wait_points
from tests.fixtures.browser import Console
from tests.runs import small_spec, stop, submit

# the first demo run builds the warm-started tiny model once per machine
FIRST_STEP_TIMEOUT = 600


def test_demo_button_trains_the_demo_with_live_reward_and_kl_curves(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    page.goto("/")
    first = page.locator("#page > *").first
    assert first.get_attribute("id") == "demo"
    expect(page.locator("#demo-button")).to_be_visible()

    page.click("#demo-button")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]+$"))
    run_id = page.url.rsplit("/", 1)[1]
    try:
        assert ui_api.get(f"/api/runs/{run_id}").json()["name"] == "arith-demo"
        points = wait_points(page, "chart-reward", "reward", 1, timeout=FIRST_STEP_TIMEOUT)
        wait_points(page, "chart-reward", "reward", len(points) + 1)
        assert chart_points(page, "chart-kl", "kl"), "the KL curve is empty"
        expect(page.locator("#run-head .pill")).to_have_text(re.compile("running", re.I))
    finally:
        stop(ui_api, run_id)
    assert console.unexpected() == []


def test_table_filters_searches_cancels_and_deletes(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    # no worker listens on this queue: the run stays queued until the page cancels it
    run = submit(ui_api, small_spec(name="browser-parked", resources={"queue": "parked"}))
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto("/")
    row = page.locator(f"tr[data-run-id='{run['id']}']")
    expect(row).to_contain_text("queued")

    page.click("#status-filter .chip[data-status='failed']")
    expect(row).to_have_count(0)
    page.click("#status-filter .chip[data-status='']")
    page.fill("#run-search", "parked")
    expect(page).to_have_url(re.compile(r"\?q=parked$"))
    expect(page.locator("tbody tr")).to_have_count(1)

    row.locator("button[data-action='cancel']").click()
    expect(row).to_contain_text("cancelled")
    assert ui_api.get(f"/api/runs/{run['id']}").json()["status"] == "cancelled"
    # it never started, so it saved no checkpoint: resuming it says it starts over
    row.locator("button[data-action='resume']").click()
    expect(page.locator("#toasts .toast-ok").last).to_have_text(
        "Run queued: restarts from step 0, no checkpoint was saved"
    )
    expect(row).to_contain_text("queued")
    row.locator("button[data-action='cancel']").click()
    expect(row).to_contain_text("cancelled")
    row.locator("button[data-action='delete']").click()
    expect(row).to_have_count(0)
    assert ui_api.get(f"/api/runs/{run['id']}").status_code == 404
    expect(page.locator("#runs-table")).to_contain_text("No runs match")
    assert console.unexpected() == []
