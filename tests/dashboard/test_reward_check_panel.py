"""The new-run page's reward check: the spec in the editor is probed on the real service
(POST /api/rewards/preflight) and a reward paying for a tag alone is named, with each
probe's completion and scores in the table beneath."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.fixtures.browser import Console

WEAK_SPEC = """name: weak-format
model: builtin:tiny
rewards:
  - name: accuracy
  - name: regex
    label: tags
    pattern: "<answer>"
"""
WRONG = (  # the first built-in arithmetic record is 37+42=, answer 79
    "<think>Working through the problem step by step, the result follows.</think>\n"
    "<answer>80</answer>"
)


def test_the_reward_check_names_a_reward_paying_for_a_tag_alone(
    page: Any, console: Console
) -> None:
    page.goto("/runs/new")
    page.locator("#presets .preset").first.wait_for()
    page.fill("#spec-text", WEAK_SPEC)
    page.click("#preflight-button")
    findings = page.locator("#preflight-findings li")
    expect(findings.first).to_contain_text("score 1 on `tags`", timeout=60_000)
    assert "`accuracy`" not in " ".join(findings.all_inner_texts())
    page.click("#preflight-probes summary")
    rows = page.locator("#preflight-probes tbody tr")
    expect(rows).to_have_count(30)  # 3 records x 10 probes
    wrong = page.locator('#preflight-probes tr[data-probe="format_wrong_answer"]').first
    cells = wrong.locator("td")
    expect(cells).to_have_text(["0", "format_wrong_answer", WRONG[:80] + "…", "0", "1"])
    expect(cells.nth(2)).to_have_attribute("title", WRONG)  # the whole completion
    assert console.unexpected() == []
