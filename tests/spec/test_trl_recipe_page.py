"""A TRL recipe in the browser: what reward functions log with log_metric is charted on the
run page, what they log with log_extra is a column of each completion in the group
inspector, and a pasted GRPOConfig becomes the new-run page's spec."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import wait_points
from tests.fixtures.browser import Console
from tests.runs import finish, small_spec, submit

RECIPE = Path(__file__).parents[1] / "data" / "trl_recipes" / "open_r1_math.yaml"


def test_logged_metrics_are_charted_and_logged_columns_shown_per_completion(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    records = "".join(
        json.dumps({"prompt": f"{i}+{i}=", "solution": str(2 * i)}) + "\n" for i in range(6)
    )
    uploaded = ui_api.post(
        "/api/datasets",
        params={"name": "trl-browser", "answer_field": "solution"},
        content=records.encode(),
        headers={"content-type": "application/x-ndjson"},
    )
    assert uploaded.status_code == 201, uploaded.text
    rewards = [{"name": "python", "function": "trl_accuracy", "label": "accuracy"}]
    data = {"source": uploaded.json()["source"], "answer_field": "solution"}
    run = finish(
        ui_api,
        submit(ui_api, small_spec(name="trl-logs", data=data, rewards=rewards, max_steps=3))["id"],
    )
    metrics = ui_api.get(f"/api/runs/{run['id']}/metrics").json()["items"]

    page.goto(f"/runs/{run['id']}")
    page.locator("#chart-logged").scroll_into_view_if_needed()
    key = "rewards/accuracy/has_number"
    points = wait_points(page, "chart-logged", key, 3, timeout=60)
    assert points == [[m["step"], m["metrics"][key]] for m in metrics]

    group = ui_api.get(f"/api/runs/{run['id']}/steps/1/groups/0").json()
    page.goto(f"/runs/{run['id']}/steps/1/groups/0")
    extras = page.locator(".completion-extras")
    expect(extras.first).to_be_visible()
    shown = sorted(extras.locator(".extra").all_inner_texts())
    assert shown == sorted(
        f"last_number {c['extras']['last_number']}".strip() for c in group["completions"]
    )
    assert console.unexpected() == []


def test_a_pasted_trl_config_becomes_the_spec_with_its_unmapped_fields_listed(
    page: Any, console: Console
) -> None:
    page.goto("/runs/new")
    expect(page.locator("#spec-text")).to_have_value(re.compile(r"name: arith-demo"))
    page.locator("#trl-paste summary").click()
    page.fill("#trl-config", RECIPE.read_text())
    page.click("#trl-convert")
    expect(page.locator("#spec-text")).to_have_value(re.compile(r"prompts_per_step: 4"))
    expect(page.locator("#spec-source")).to_have_text("converted from a TRL config")
    expect(page.locator("#spec-text")).to_have_value(re.compile(r"use_vllm: true"))
    expect(page.locator("#trl-unmapped li", has_text="log_completions")).to_have_count(1)
    assert "async_generation" not in page.locator("#spec-text").input_value()
    page.select_option("#trl-class", "AsyncGRPOConfig")  # TRL's AsyncGRPOTrainer
    page.click("#trl-convert")
    expect(page.locator("#spec-text")).to_have_value(re.compile(r"async_generation: true"))
    expect(page.locator("#spec-text")).to_have_value(re.compile(r"vllm_mode: server"))
    assert console.unexpected() == []
