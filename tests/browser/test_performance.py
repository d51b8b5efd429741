"""A 10,000-step run's page loads and draws in under 2 seconds and stays responsive while
its stream replays every step; and with a run training live at 20 steps a second, the page
draws every step and stays responsive (frames, long tasks, the time a key press takes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.browser.charts import chart_points
from tests.browser.conftest import Console
from tests.browser.runs import small_spec, submit
from tests.stack import ROOT, Stack

STEPS = 10_000
BUDGET_MS = float(os.environ.get("GRPO_PERF_BUDGET_MS", "2000"))
TIMELINE_JS = """() => {
  const at = (name) => Math.round(performance.getEntriesByName(name)[0]?.startTime ?? -1);
  const metrics = performance.getEntriesByType('resource').find((r) => r.name.includes('/metrics'));
  return {
    metrics_requested: Math.round(metrics.startTime),
    metrics_received: Math.round(metrics.responseEnd),
    parsed: at('grpo:history-fetched'), merged: at('grpo:history-merged'),
    drawn: at('grpo:history-drawn'),
  };
}"""
FRAME_GAPS_JS = """(ms) => new Promise((resolve) => {
  const gaps = [];
  let last = performance.now();
  const end = last + ms;
  const frame = (now) => {
    gaps.push(now - last);
    last = now;
    if (now < end) requestAnimationFrame(frame); else resolve(gaps);
  };
  requestAnimationFrame(frame);
})"""


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


def test_ten_thousand_steps_draw_in_under_two_seconds_and_stay_responsive(
    page: Any, api: httpx.Client, stack: Stack, console: Console
) -> None:
    run = seeded_run(api, stack)
    page.goto(f"/runs/{run['id']}")
    page.wait_for_function(
        "performance.getEntriesByName('grpo:history-drawn').length > 0", timeout=60_000
    )
    timeline = page.evaluate(TIMELINE_JS)
    drawn_ms = timeline["drawn"]

    points = chart_points(page, "chart-reward", "reward")
    assert points[0][0] == 1 and points[-1][0] == STEPS
    assert len(points) <= 1000, "a long run is thinned to what the chart can show"
    assert page.get_attribute("#page", "data-rendered-steps") == str(STEPS)

    gaps = sorted(page.evaluate(FRAME_GAPS_JS, 3000))
    p95 = gaps[int(len(gaps) * 0.95)]
    print(f"10k steps, ms after navigation: {timeline}; frame gap p95 {p95:.0f} ms")
    assert drawn_ms < BUDGET_MS
    assert p95 < 200, f"frames stall while the stream replays: p95 gap {p95:.0f} ms"
    assert console.unexpected() == []


LIVE_STEPS, LIVE_EVERY_S = 100, 0.05  # 20 steps a second for 5 seconds
# Measured on the 2-core box (load ~1.3, SQLite stack, stream polling every 0.5 s), 4 runs:
# longest task 0-53 ms, frame gap max 33-50 ms (p95 17), key press to paint 4-40 ms, 91-92
# of 100 steps drawn when the writes ended (the rest within the next poll). Before the
# curves were drawn one chart per task: 8 long tasks up to 170 ms, frame gaps up to 167 ms.
# The bounds leave ~4x headroom for a busier CI box.
PROBE_JS = """() => {
  const probe = { longTasks: [], frameGaps: [], inputs: [], slowEvents: [], stopped: false };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) probe.longTasks.push(e.duration);
  }).observe({ type: 'longtask' });
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) probe.slowEvents.push([e.name, e.duration]);
  }).observe({ type: 'event', durationThreshold: 16 });
  // input -> handlers -> next frame painted: what the user waits for after a key press
  document.addEventListener('keydown', (event) => {
    const received = event.timeStamp;
    requestAnimationFrame(() => setTimeout(() => probe.inputs.push({
      ms: performance.now() - received,
      label: document.querySelector('.scrubber .step-label').textContent,
    }), 0));
  }, { capture: true });
  let last = performance.now();
  const frame = (now) => {
    probe.frameGaps.push(now - last);
    last = now;
    if (!probe.stopped) requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  window.grpoProbe = probe;
}"""


def test_twenty_live_steps_a_second_are_all_drawn_and_the_page_stays_responsive(
    page: Any, api: httpx.Client, stack: Stack, console: Console
) -> None:
    # parked (no worker reads the queue); the seeder claims it and writes as a worker would
    spec = small_spec(name="browser-live-20hz", max_steps=LIVE_STEPS, resources={"queue": "parked"})
    run_id = submit(api, spec)["id"]
    seeder = subprocess.Popen(
        [sys.executable, "-m", "tests.seed", "live", run_id, str(LIVE_STEPS), str(LIVE_EVERY_S)],
        cwd=ROOT, env=stack.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert seeder.stdin and seeder.stdout
    try:
        assert seeder.stdout.readline().strip() == "claimed"
        page.goto(f"/runs/{run_id}")
        expect(page.locator("#page")).to_have_attribute("data-status", "running")
        expect(page.locator("#stream-state")).to_have_attribute("data-state", "open")
        page.evaluate(PROBE_JS)
        seeder.stdin.write("go\n")
        seeder.stdin.flush()
        for key in "[][":  # the user walks the step scrubber during the flood
            time.sleep(1.2)
            page.keyboard.press(key)
        writes = json.loads(seeder.stdout.readline())
        shown_when_writes_ended = int(page.get_attribute("#page", "data-rendered-steps") or 0)
        page.wait_for_function(
            f"document.getElementById('page').dataset.renderedSteps === '{LIVE_STEPS}'",
            timeout=10_000,
        )
        probe = page.evaluate("() => { window.grpoProbe.stopped = true; return window.grpoProbe; }")
    finally:
        seeder.communicate("finish\n", timeout=60)

    points = chart_points(page, "chart-reward", "reward")
    assert [int(step) for step, _ in points] == list(range(1, LIVE_STEPS + 1)), "gaps or doubles"
    longest_task = max(probe["longTasks"], default=0)
    gaps = sorted(probe["frameGaps"][1:])
    inputs = [i["ms"] for i in probe["inputs"]]
    print(
        f"live {LIVE_STEPS} steps at {1 / LIVE_EVERY_S:.0f}/s: writes {writes}; drawn when "
        f"writes ended {shown_when_writes_ended}; long tasks {len(probe['longTasks'])} "
        f"max {longest_task:.0f} ms; frame gap p95 {gaps[int(len(gaps) * 0.95)]:.0f} max "
        f"{gaps[-1]:.0f} ms; key press to paint {[round(ms) for ms in inputs]} ms; "
        f"slow events {probe['slowEvents']}"
    )
    assert writes["late_ms_max"] < 250, f"the seeder fell behind 20 steps/s: {writes}"
    assert len(inputs) == 3 and probe["inputs"][-1]["label"].startswith("Step ")
    assert longest_task < 200, f"a {longest_task:.0f} ms task blocked the page"
    assert gaps[-1] < 250, f"frames stalled for {gaps[-1]:.0f} ms"
    assert max(inputs) < 250, f"a key press took {max(inputs):.0f} ms to show"
    assert console.unexpected() == []
