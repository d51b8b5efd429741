"""The new-run page: presets with the demo first, a YAML/JSON editor whose validation
errors land next to their lines, and a submit that opens the live run."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import wait_points
from tests.dashboard.test_run_page import ADVANTAGE_BARS_JS
from tests.fixtures.browser import Console
from tests.runs import stop

BAD_SPEC = """name: broken
max_steps: 0
rewards:
  - name: accuracy
    weight: heavy
beta: 0.1
colour: blue
"""


def test_demo_preset_is_first_and_submits_a_live_run(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    page.goto("/runs/new")
    first = page.locator("#presets .preset").first
    expect(first).to_have_attribute("data-preset", "arith-demo")
    expect(first).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#spec-text")).to_have_value(re.compile(r"name: arith-demo"))

    page.click("#submit-button")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f]+$"))
    run_id = page.url.rsplit("/", 1)[1]
    try:
        preset = ui_api.get("/api/presets").json()["items"][0]["spec"]
        run = ui_api.get(f"/api/runs/{run_id}").json()
        assert {k: run["spec"][k] for k in preset} == preset
        points = wait_points(page, "chart-reward", "reward", 1, timeout=600)
        page.wait_for_function(f"({ADVANTAGE_BARS_JS})() > 0", timeout=60_000)
        wait_points(page, "chart-reward", "reward", len(points) + 1)
    finally:
        stop(ui_api, run_id)
    assert console.unexpected() == []


def test_validation_errors_are_shown_on_their_lines(page: Any, console: Console) -> None:
    page.goto("/runs/new")
    page.locator("#presets .preset").first.wait_for()
    page.fill("#spec-text", BAD_SPEC)
    page.click("#submit-button")

    problems = page.locator("#errors li")
    expect(problems).to_have_count(3)
    by_loc = {
        problems.nth(i).get_attribute("data-loc"): problems.nth(i).get_attribute("data-line")
        for i in range(3)
    }
    assert by_loc == {"max_steps": "2", "rewards.0.accuracy.weight": "5", "colour": "7"}
    marked = page.locator(".editor-gutter .ln.is-error")
    assert [marked.nth(i).inner_text() for i in range(marked.count())] == ["2", "5", "7"]
    expect(page.locator(".editor-backdrop .inline-error").first).to_contain_text("greater than")

    problems.nth(1).click()
    selected = page.evaluate(
        "() => { const t = document.getElementById('spec-text');"
        " return t.value.slice(t.selectionStart, t.selectionEnd); }"
    )
    assert selected.strip() == "weight: heavy"
    assert console.unexpected(allowed=("status of 422",)) == []


LIVE_SPEC = """name: checked-as-typed
model: builtin:tiny-arith
num_generations: 1
per_device_train_batch_size: 4
rewards:
  - name: python
    function: no_such_reward
"""


def test_problems_show_as_you_type_as_submit_would_answer_them(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    """Issue 44: `num_generations: 1` said "No problems found" until submit. Now the
    server checks the spec as it is typed: the JobSpec's rules and this server's (an
    uninstalled reward function), every problem on its line, and nothing is submitted;
    a model with random weights is a warning, shown apart."""
    page.goto("/runs/new")
    page.locator("#presets .preset").first.wait_for()
    expect(page.locator("#no-errors")).to_be_visible()  # the demo preset: nothing to say
    page.fill("#spec-text", LIVE_SPEC)
    problems = page.locator("#errors li")
    expect(problems).to_have_count(3)
    expect(page.locator("#no-errors")).to_be_hidden()
    by_loc = {
        problems.nth(i).get_attribute("data-loc"): problems.nth(i).get_attribute("data-line")
        for i in range(3)
    }
    assert by_loc == {
        "num_generations": "3",
        "per_device_train_batch_size": "4",
        "rewards.0.function": "7",
    }
    expect(page.locator("#errors li[data-loc='per_device_train_batch_size']")).to_contain_text(
        "prompts_per_step"
    )
    page.fill("#spec-text", LIVE_SPEC.split("num_generations")[0] + "num_generations: 2\n")
    expect(problems).to_have_count(0)
    expect(page.locator("#no-errors")).to_be_visible()
    expect(page.locator("#warnings-block")).to_be_hidden()
    # a model that cannot learn: a warning apart from the problems, before any submit
    random = LIVE_SPEC.replace("tiny-arith", "small").split("num_generations")[0]
    page.fill("#spec-text", random + "num_generations: 2\n")
    expect(page.locator("#warnings li[data-loc='model']")).to_contain_text("random weights")
    expect(page.locator("#warnings-block")).to_be_visible()
    expect(problems).to_have_count(0)
    expect(page.locator("#no-errors")).to_be_visible()
    names = [r["name"] for r in ui_api.get("/api/runs", params={"limit": 200}).json()["items"]]
    assert "checked-as-typed" not in names
    assert console.unexpected() == []


def test_yaml_syntax_errors_point_at_their_line_before_any_request(
    page: Any, console: Console
) -> None:
    page.goto("/runs/new")
    page.locator("#presets .preset").first.wait_for()
    page.fill("#spec-text", "name: ok\nrewards: [accuracy\nmax_steps: 3\n")
    problem = page.locator("#errors li").first
    expect(problem).to_have_attribute("data-loc", "YAML syntax")
    assert problem.get_attribute("data-line") in {"2", "3", "4"}
    assert console.unexpected() == []


def test_format_toggle_round_trips_the_spec(page: Any, console: Console) -> None:
    page.goto("/runs/new")
    expect(page.locator("#spec-text")).to_have_value(re.compile("arith-demo"))
    yaml_text = page.input_value("#spec-text")
    page.click(".seg button[data-format='json']")
    as_json = json.loads(page.input_value("#spec-text"))
    assert as_json["name"] == "arith-demo"
    page.click(".seg button[data-format='yaml']")
    assert page.input_value("#spec-text") == yaml_text
    assert console.unexpected() == []


def test_edit_as_new_loads_a_runs_spec(
    page: Any, finished_run: dict[str, Any], console: Console
) -> None:
    page.goto(f"/runs/new?from={finished_run['id']}")
    expect(page.locator("#spec-text")).to_have_value(re.compile(r"name: browser-finished \(copy\)"))
    expect(page.locator("#presets .preset").first).to_have_attribute("aria-pressed", "true")
    assert console.unexpected() == []


def test_a_dataset_is_previewed_uploaded_and_used_from_the_upload_box(
    page: Any, ui_api: httpx.Client, console: Console
) -> None:
    page.goto("/runs/new")
    page.locator("#presets .preset").first.wait_for()

    def choose(name: str, content: bytes) -> None:
        file = {"name": name, "mimeType": "application/x-ndjson", "buffer": content}
        page.set_input_files("#upload-file", files=[file])

    choose("joined.jsonl", b'{"q": "2+2=", "a": "4"}{"q": "3+5=", "a": "8"}')
    expect(page.locator("#upload-preview")).to_contain_text("were the newlines stripped?")

    choose("sums.jsonl", b'{"q": "2+2=", "a": "4"}\n{"q": "3+5=", "a": "8"}\n')
    expect(page.locator("#upload-preview")).to_contain_text("sums.jsonl: 2 records, fields q, a")
    expect(page.locator("#upload-preview pre")).to_contain_text('{"q":"2+2=","a":"4"}')
    assert page.input_value("#upload-prompt-field") == "q"
    assert page.input_value("#upload-answer-field") == "a"
    page.click("#upload-use")
    expect(page.locator("#upload-status")).to_contain_text("2 records")
    source = page.locator("#upload-status").inner_text().split(":")[0:2]
    text = page.input_value("#spec-text")
    assert f"source: {':'.join(source)}" in text and "prompt_field: q" in text, text
    assert any(d["source"] == ":".join(source) for d in ui_api.get("/api/datasets").json()["items"])
    assert console.unexpected() == []
