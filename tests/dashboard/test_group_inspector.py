"""Group inspector: opened by clicking a box of the step's group plot, it shows the G
completions with the rewards and advantages the API holds; the keyboard walks groups and steps."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import CHART_JS
from tests.fixtures.browser import Console
from tests.runs import finish, small_spec, submit

BOX_CENTRES_JS = f"""() => {{
  const el = document.getElementById('chart-groups');
  const chart = ({CHART_JS})('chart-groups');
  const option = chart?.getOption();
  if (!option || !option.series?.[0]?.data?.length) return null;
  el.scrollIntoView({{ block: 'center' }});
  const rect = el.getBoundingClientRect();
  return option.xAxis[0].data.map((label, i) => {{
    const box = option.series[0].data[i];
    const [x, y] = chart.convertToPixel({{ seriesIndex: 0 }}, [i, (box.value ?? box)[2]]);
    return {{ index: Number(label.slice(1)), x: rect.left + x, y: rect.top + y }};
  }});
}}"""


def box_centres(page: Any) -> list[dict[str, float]]:
    page.wait_for_function(f"({BOX_CENTRES_JS})() !== null", timeout=30_000)
    return list(page.evaluate(BOX_CENTRES_JS))


def test_box_click_opens_the_group_with_the_apis_completions(
    page: Any, ui_api: httpx.Client, finished_run: dict[str, Any], console: Console
) -> None:
    run_id, step = finished_run["id"], 3
    groups = ui_api.get(f"/api/runs/{run_id}/steps/{step}/groups").json()["items"]
    kept = {g["index"] for g in groups if g["has_completions"]}
    page.goto(f"/runs/{run_id}/steps/{step}")
    expect(page.locator(".scrubber .step-label")).to_contain_text(f"Step {step} /")

    target = next(box for box in box_centres(page) if box["index"] in kept)
    page.mouse.click(target["x"], target["y"])
    page.wait_for_url(re.compile(rf"/runs/{run_id}/steps/{step}/groups/{int(target['index'])}$"))

    group = ui_api.get(f"/api/runs/{run_id}/steps/{step}/groups/{int(target['index'])}").json()
    rows = page.locator("article.completion")
    rows.first.wait_for()
    assert rows.count() == finished_run["spec"]["num_generations"] == len(group["completions"])
    shown = [
        (
            float(rows.nth(i).get_attribute("data-reward") or "nan"),
            float(rows.nth(i).get_attribute("data-advantage") or "nan"),
        )
        for i in range(rows.count())
    ]
    assert shown == [(c["reward"], c["advantage"]) for c in group["completions"]]
    for i, completion in enumerate(group["completions"]):  # one shaded span per token
        text = rows.nth(i).locator(".completion-text")
        assert text.get_attribute("data-tokens") == "api", json.dumps(completion)
        spans = text.locator(".tok").evaluate_all("(spans) => spans.map((s) => s.textContent)")
        assert len(spans) == completion["num_tokens"] == len(completion["tokens"])
        assert spans == completion["tokens"] and "".join(spans) == completion["text"]
    assert sorted(c["advantage"] for c in group["completions"]) == sorted(group["advantages"])
    assert page.locator("#prompt-text").inner_text() == group["prompt"]
    assert page.locator("#answer-text").inner_text() == group["answer"]
    assert console.unexpected() == []


def test_keyboard_walks_groups_and_steps(
    page: Any, finished_run: dict[str, Any], console: Console
) -> None:
    run_id = finished_run["id"]
    page.goto(f"/runs/{run_id}/steps/2/groups/0")
    page.locator("article.completion").first.wait_for()

    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(rf"/runs/{run_id}/steps/2/groups/1$"))
    page.keyboard.press("]")
    page.wait_for_url(re.compile(rf"/runs/{run_id}/steps/3/groups/1$"))
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(re.compile(rf"/runs/{run_id}/steps/3/groups/0$"))
    assert page.locator(".group-item[aria-current='true']").get_attribute("data-index") == "0"
    page.go_back()
    page.wait_for_url(re.compile(rf"/runs/{run_id}/steps/3/groups/1$"))
    assert console.unexpected() == []


def test_group_without_kept_texts_still_shows_rewards_and_advantages(
    page: Any, ui_api: httpx.Client, finished_run: dict[str, Any], console: Console
) -> None:
    run_id = finished_run["id"]
    groups = ui_api.get(f"/api/runs/{run_id}/steps/1/groups").json()["items"]
    bare = next(g for g in groups if not g["has_completions"])
    page.goto(f"/runs/{run_id}/steps/1/groups/{bare['index']}")
    rows = page.locator("article.completion")
    rows.first.wait_for()
    assert rows.count() == len(bare["rewards"])
    shown = sorted(
        float(rows.nth(i).get_attribute("data-advantage") or "nan") for i in range(rows.count())
    )
    assert shown == sorted(bare["advantages"])
    assert "max_groups_per_step" in page.locator("#completions").inner_text()
    assert console.unexpected() == []


def test_a_function_that_does_not_apply_shows_a_dash_under_its_label(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    # records without an answer: the example plugin returns null for them; `any` applies
    records = "".join(json.dumps({"prompt": f"{i}+1=", "answer": ""}) + "\n" for i in range(4))
    created = ui_api.post(
        "/api/datasets",
        params={"name": "no-answers"},
        content=records.encode(),
        headers={"content-type": "application/x-ndjson"},
    )
    assert created.status_code == 201, created.text
    rewards = [
        {"name": "python", "function": "contains_answer", "label": "has_answer"},
        {"name": "regex", "pattern": ".", "label": "any"},
    ]
    spec = small_spec(name="browser-null", max_steps=1, data={"source": created.json()["source"]})
    run = finish(ui_api, submit(ui_api, {**spec, "rewards": rewards})["id"])
    assert run["status"] == "succeeded", run["error"]
    page.goto(f"/runs/{run['id']}/steps/1/groups/0")
    chips = page.locator("article.completion .completion-fns").first
    expect(chips).to_contain_text("has_answer –")
    expect(chips).to_contain_text("any ")
    assert not console.unexpected()


def test_a_replay_shows_each_completions_reward_and_advantage_trained_and_replayed(
    page: Any, ui_api: httpx.Client, console: Console, shoot: Callable[[Any, str], None]
) -> None:
    """A run of its own (the shared finished run stays read-only), replayed by the stack's
    worker under "a lowercase letter" instead of "a digit": the inspector's card lists the
    group's completions in sampling order with the API's replayed values, the flips marked;
    the run page lists the replay with its summary."""
    run = submit(ui_api, small_spec(name="browser-replay", max_steps=2,
                                    rewards=[{"name": "regex", "pattern": r"\d"}]))  # fmt: skip
    run_id = finish(ui_api, run["id"])["id"]
    asked = ui_api.post(
        f"/api/runs/{run_id}/rescore",
        json={"rewards": [{"name": "regex", "pattern": "[a-z]"}], "steps": [2]},
    )
    assert asked.status_code == 202, asked.text
    url = f"/api/runs/{run_id}/rescores/{asked.json()['id']}"
    deadline = time.monotonic() + 120
    while (done := ui_api.get(url).json())["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, "the worker did not run the replay"
        time.sleep(0.3)
    assert done["status"] == "succeeded", done["error"]
    group = done["groups"][0]
    page.goto(f"/runs/{run_id}/steps/2/groups/{group['group_index']}?replay={done['id']}")
    rows = page.locator("#replay-table tbody tr")
    expect(rows).to_have_count(len(group["completions"]))
    for i, completion in enumerate(group["completions"]):
        row = rows.nth(i)
        assert float(row.get_attribute("data-reward") or "nan") == completion["reward"]
        assert float(row.get_attribute("data-advantage") or "nan") == completion["advantage"]
    flipped = {f["completion"] for f in group["flips"]}
    expect(page.locator("#replay-table tr.is-flipped")).to_have_count(len(flipped))
    expect(page.locator("#replay-summary")).to_contain_text(f"{len(flipped)} of ")
    shoot(page, "group-replay")
    page.goto(f"/runs/{run_id}")  # the run page lists it, with its summary
    row = page.locator(f"#replays-panel tr[data-replay='{done['id']}']")
    expect(row).to_contain_text("succeeded")
    summary = done["summary"]
    expect(row).to_contain_text(f"{summary['flipped_groups']} of {summary['groups']}")
    row.scroll_into_view_if_needed()
    shoot(page, "run-replays")
    assert console.unexpected() == []
