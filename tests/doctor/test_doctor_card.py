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
from tests.runs import finish, long_spec, small_spec, status_of, stop, submit, wait_for_run


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


def test_the_reward_preflights_finding_shows_its_probes_and_their_scores(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    rewards = [{"name": "accuracy"}, {"name": "regex", "pattern": "<answer>", "label": "tags"}]
    spec = small_spec(name="browser-preflight", max_steps=1, save_steps=0, rewards=rewards,
                      reward_preflight_records=1)  # fmt: skip
    run = submit(ui_api, spec)
    finish(ui_api, run["id"])
    page.goto(f"/runs/{run['id']}")
    hole = page.locator('#doctor [data-finding="reward_hole:rewards.1.format_wrong_answer@0"]')
    expect(hole.locator(".doctor-steps")).to_have_text("reward preflight, before step 1")
    expect(hole.locator(".doctor-message")).to_contain_text(
        "format-only completions (the format around a wrong answer) score 1 on `tags`"
    )
    expect(hole.locator(".doctor-spark")).to_have_count(0)  # no curve: found before step 1
    probes = hole.locator(".doctor-completions li")
    expect(probes).to_have_count(2)
    expect(probes.nth(0)).to_contain_text("probe correct, record 0: ")
    expect(probes.nth(0)).to_contain_text("scored 2 (accuracy 1, tags 1)")
    expect(probes.nth(1)).to_contain_text("probe format_wrong_answer, record 0: ")
    expect(probes.nth(1)).to_contain_text("scored 1 (accuracy 0, tags 1)")
    assert console.unexpected() == []
