"""The run page's Doctor card: a provoked run's finding appears live, with its evidence and
groups, "clone with this change" opens the new-run page with the field set, and the runs
list marks the run."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.fixtures.browser import Console
from tests.runs import long_spec, status_of, stop, submit, wait_for_run


def test_a_provoked_finding_shows_live_and_clones_with_its_change(
    page: Any, ui_api: httpx.Client, console: Console, shoot: Callable[[Any, str], None]
) -> None:
    # the worker is busy with another run while the page opens: the finding can only come
    # over the stream, once the page shows none
    blocker = submit(ui_api, long_spec(name="browser-doctor-blocker"))
    wait_for_run(ui_api, blocker["id"], lambda r: r["step"] > 0)
    # the random built-in model almost never samples its end token: with room for two tokens
    # nearly every completion is cut at the limit, so the truncation rule fires at step 5
    run = submit(ui_api, long_spec(name="browser-doctor", max_completion_length=2))
    page.goto(f"/runs/{run['id']}")
    expect(page.locator("#doctor .doctor-empty")).to_have_text("Nothing found yet.")
    stop(ui_api, blocker["id"])
    finding = page.locator('#doctor [data-rule="truncation"]')
    expect(finding).to_be_visible(timeout=120_000)
    assert status_of(ui_api, run["id"]) == "running", "the finding must arrive while the run trains"
    expect(finding.locator(".doctor-message")).to_contain_text(
        "hit max_completion_length (2 tokens)"
    )
    expect(finding.locator(".doctor-severity")).to_have_text("critical")
    # the sparkline draws the run's own clipped_ratio curve from before the finding opened
    page.wait_for_function(
        """() => {
          const line = document.querySelector('#doctor [data-rule="truncation"] polyline');
          return line && line.getAttribute('points').split(' ').length >= 5;
        }""",
        timeout=30_000,
    )
    shoot(page, "doctor-card")
    group = finding.locator(".doctor-links a").first
    expect(group).to_have_attribute(
        "href", re.compile(rf"^/runs/{run['id']}/steps/\d+/groups/\d+$")
    )

    page.goto("/")
    mark = page.locator(f'tr[data-run-id="{run["id"]}"] .doctor-mark')
    expect(mark).to_have_text(
        re.compile(r"^⚕ [1-9]$")
    )  # no_signal too: the model gets no sum right
    expect(mark).to_have_class(re.compile("doctor-mark-critical"))

    page.goto(f"/runs/{run['id']}")
    page.locator('#doctor [data-rule="truncation"] .doctor-clone').click()
    page.wait_for_url(re.compile(r"/runs/new\?from="))
    expect(page.locator("#spec-source")).to_contain_text("with max_completion_length: 4")
    editor = page.locator("#editor textarea")
    expect(editor).to_have_value(re.compile(r"^max_completion_length: 4$", re.M))
    expect(editor).to_have_value(re.compile(r"^mask_truncated_completions: true$", re.M))
    expect(editor).to_have_value(re.compile(r"^name: browser-doctor \(copy\)$", re.M))
    stop(ui_api, run["id"])
    assert console.unexpected() == []
