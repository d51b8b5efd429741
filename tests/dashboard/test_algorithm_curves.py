"""The run page draws the issue-15 metrics with the other curves: dynamic sampling's
dropped groups in their own card (shown only for runs that report them) and the share of
tokens the entropy mask leaves out next to the entropy."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import wait_points
from tests.fixtures.browser import Console
from tests.runs import finish, small_spec, submit


def test_dropped_groups_and_entropy_masked_share_are_drawn_from_the_runs_metrics(
    page: Any, ui_api: httpx.Client, finished_run: dict[str, Any], console: Console
) -> None:
    spec = small_spec(
        name="browser-dynamic",
        rewards=[{"name": "regex", "pattern": r"\d"}],
        dynamic_sampling={"enabled": True, "max_rounds": 2},
        top_entropy_quantile=0.5,
    )
    run = finish(ui_api, submit(ui_api, spec)["id"])
    metrics = ui_api.get(f"/api/runs/{run['id']}/metrics").json()["items"]
    steps = len(metrics)
    page.goto(f"/runs/{run['id']}")
    expect(page.locator("#card-dynamic")).to_be_visible(timeout=30_000)
    page.locator("#card-dynamic").scroll_into_view_if_needed()
    dropped = wait_points(page, "chart-dynamic", "dynamic_sampling/dropped_groups", steps)
    assert dropped == [
        [m["step"], m["metrics"]["dynamic_sampling/dropped_groups"]] for m in metrics
    ]
    page.locator("#chart-entropy").scroll_into_view_if_needed()
    masked = wait_points(page, "chart-entropy", "entropy_masked_share", steps)
    assert masked == [[m["step"], m["metrics"]["entropy_masked_share"]] for m in metrics]
    assert all(0 < share < 1 for _, share in masked)

    # the inspector lists the dropped groups under their filter and says why they sat out
    step = next(m["step"] for m in metrics if m["metrics"]["dynamic_sampling/dropped_groups"])
    dropped_groups = ui_api.get(
        f"/api/runs/{run['id']}/steps/{step}/groups", params={"filter": "dropped"}
    ).json()["items"]
    first = dropped_groups[0]["index"]
    page.goto(f"/runs/{run['id']}/steps/{step}/groups/{first}?filter=dropped")
    expect(page.locator("#group-items .group-item")).to_have_count(len(dropped_groups))
    expect(page.locator("#group-filter")).to_have_value("dropped")
    expect(page.locator("#group-dropped")).to_have_text("dropped (dynamic sampling)")
    trained = ui_api.get(f"/api/runs/{run['id']}/steps/{step}/groups").json()["items"]
    assert {g["index"] for g in trained}.isdisjoint(g["index"] for g in dropped_groups)

    # a run without dynamic sampling has no such card
    page.goto(f"/runs/{finished_run['id']}")
    wait_points(page, "chart-reward", "reward", finished_run["spec"]["max_steps"])
    expect(page.locator("#card-dynamic")).to_be_hidden()
    assert console.unexpected() == []
