"""A 10,000-step run's page draws every step, thinned, while its stream replays them; and
with a run written live at 20 steps a second, the page draws every step once and the step
scrubber answers key presses during the flood. How fast (first draw, frame gaps, long tasks,
key press to paint) is measured by bench/page_speed.py, not asserted here: a test's outcome
must not depend on the machine's load."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import chart_points
from tests.fixtures.browser import Console
from tests.runs import small_spec, submit
from tests.stack import ROOT, Stack

STEPS = 10_000
HANG_MS = 120_000
"""A wait here that takes longer is a hang: the page does each in about a second."""


def seeded_run(api: httpx.Client, stack: Stack) -> dict[str, Any]:
    # parked on a queue no worker reads, seeded as a worker would write, then made final
    spec = small_spec(name="browser-10k", max_steps=STEPS, resources={"queue": "parked"})
    run = submit(api, spec)
    subprocess.run(
        [sys.executable, "-m", "tests.seed", "into", run["id"], str(STEPS)],
        cwd=ROOT,
        env=stack.env,
        check=True,
    )
    api.post(f"/api/runs/{run['id']}/cancel")
    return run


def test_ten_thousand_steps_are_drawn_thinned_from_the_first_step_to_the_last(
    page: Any, ui_api: httpx.Client, ui_stack: Stack, console: Console
) -> None:
    run = seeded_run(ui_api, ui_stack)
    page.goto(f"/runs/{run['id']}")
    page.wait_for_function(
        "performance.getEntriesByName('grpo:history-drawn').length > 0", timeout=HANG_MS
    )
    points = chart_points(page, "chart-reward", "reward")
    assert points[0][0] == 1 and points[-1][0] == STEPS
    assert len(points) <= 1000, "a long run is thinned to what the chart can show"
    assert page.get_attribute("#page", "data-rendered-steps") == str(STEPS)
    assert console.unexpected() == []


LIVE_STEPS, LIVE_EVERY_S = 100, 0.05  # 20 steps a second for 5 seconds
KEYS_JS = """() => {
  window.grpoKeys = [];  // the scrubber's label as the frame after each key press shows it
  document.addEventListener('keydown', () => requestAnimationFrame(() => setTimeout(() =>
    window.grpoKeys.push(document.querySelector('.scrubber .step-label').textContent), 0)),
    { capture: true });
}"""


def rendered_steps(at_least: int) -> str:
    return f"Number(document.getElementById('page').dataset.renderedSteps) >= {at_least}"


def test_twenty_live_steps_a_second_are_all_drawn_once_and_the_scrubber_answers_keys(
    page: Any, ui_api: httpx.Client, ui_stack: Stack, console: Console
) -> None:
    # parked (no worker reads the queue); the seeder claims it and writes as a worker would
    spec = small_spec(name="browser-live-20hz", max_steps=LIVE_STEPS, resources={"queue": "parked"})
    run_id = submit(ui_api, spec)["id"]
    seeder = subprocess.Popen(
        [sys.executable, "-m", "tests.seed", "live", run_id, str(LIVE_STEPS), str(LIVE_EVERY_S)],
        cwd=ROOT, env=ui_stack.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert seeder.stdin and seeder.stdout
    try:
        assert seeder.stdout.readline().strip() == "claimed"
        page.goto(f"/runs/{run_id}")
        expect(page.locator("#page")).to_have_attribute("data-status", "running")
        expect(page.locator("#stream-state")).to_have_attribute("data-state", "open")
        page.evaluate(KEYS_JS)
        seeder.stdin.write("go\n")
        seeder.stdin.flush()
        for drawn, key in zip((25, 50, 75), "[][", strict=True):  # a user walks the scrubber
            page.wait_for_function(rendered_steps(drawn), timeout=HANG_MS)  # during the flood
            page.keyboard.press(key)
        seeder.stdout.readline()  # the writes ended
        page.wait_for_function(rendered_steps(LIVE_STEPS), timeout=HANG_MS)
        page.wait_for_function("window.grpoKeys.length === 3", timeout=HANG_MS)
        labels = page.evaluate("window.grpoKeys")
    finally:
        seeder.communicate("finish\n", timeout=60)

    points = chart_points(page, "chart-reward", "reward")
    assert [int(step) for step, _ in points] == list(range(1, LIVE_STEPS + 1)), "gaps or doubles"
    assert all(label.startswith("Step ") for label in labels), labels
    assert page.get_attribute("#page", "data-rendered-steps") == str(LIVE_STEPS)
    assert console.unexpected() == []
