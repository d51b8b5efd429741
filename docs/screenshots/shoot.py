"""Retake every dashboard screenshot in this folder: 1280x800, headless Debian Chromium, from
the real service (embedded default: SQLite, filesystem broker, one celery worker) after the
built-in demo.

    .venv/bin/python docs/screenshots/shoot.py [--out docs/screenshots] [--step 150]

Submits the demo preset (arith-demo: 300 steps of 32 x 8 on builtin:tiny-arith, 25 s to 3
minutes on 2 CPU cores), a clone of it with learning_rate 5e-4 (for the compare page) and a
run that fails (a Hugging Face model id on a machine with no network), waits for all three,
then shoots each page. Prints what it picked (run ids, step, group, prompt).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.dashboard.test_new_run_page import BAD_SPEC  # noqa: E402
from tests.fixtures.browser import CHROMIUM, CHROMIUM_ARGS, VIEWPORT  # noqa: E402
from tests.stack import running_stack  # noqa: E402

FINAL = {"succeeded", "failed", "cancelled"}
HEATMAP_DRAWN_JS = """(id) => {
  const chart = window.echarts.getInstanceByDom(document.getElementById(id));
  return (chart?.getOption()?.series?.[0]?.data?.length ?? 0) > 0;
}"""


def wait_final(api: httpx.Client, run_id: str, timeout: float = 1200) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = dict(api.get(f"/api/runs/{run_id}").json())
        if run["status"] in FINAL:
            return run
        time.sleep(2)
    raise TimeoutError(f"run {run_id} not finished in {timeout}s")


def train_runs(api: httpx.Client) -> dict[str, dict[str, Any]]:
    """The demo, its lr=5e-4 clone and a failing run, each waited for to the end."""
    demo_spec = api.get("/api/presets").json()["items"][0]["spec"]
    demo = api.post("/api/runs", json=demo_spec).json()
    clone = api.post(f"/api/runs/{demo['id']}/clone", json={"patch": {"learning_rate": 5e-4}})
    failing = {"name": "hub-model-offline", "model": "Qwen/Qwen2.5-0.5B-Instruct", "max_steps": 5}
    failed = api.post("/api/runs", json=failing).json()
    runs = {"demo": demo, "clone": clone.json(), "failed": failed}
    finished = {name: wait_final(api, run["id"]) for name, run in runs.items()}
    assert finished["demo"]["status"] == finished["clone"]["status"] == "succeeded", finished
    assert finished["failed"]["status"] == "failed", finished["failed"]
    return finished


def pick_views(api: httpx.Client, run_id: str, step: int) -> tuple[int, str]:
    """A mixed group whose texts were kept at `step`; of the prompts drawn most often, the
    one whose group mean rose most from its first draw to its last."""
    groups = api.get(f"/api/runs/{run_id}/steps/{step}/groups").json()["items"]
    kept = [g for g in groups if g["has_completions"]]
    group = next((g for g in kept if g["outcome"] == "mixed"), kept[0])
    lines = api.get(f"/api/runs/{run_id}/export", params={"what": "groups", "format": "jsonl"})
    means: dict[str, list[float]] = defaultdict(list)
    for line in lines.text.splitlines():
        row = json.loads(line)
        means[row["prompt_id"]].append(row["reward_mean"])
    most = max(len(m) for m in means.values())
    prompt = max(
        (p for p, m in means.items() if len(m) == most), key=lambda p: means[p][-1] - means[p][0]
    )
    return int(group["index"]), prompt


def scroll_to(page: Any, selector: str, offset: int = -60) -> None:
    page.locator(selector).first.scroll_into_view_if_needed()
    page.evaluate(
        "([s, dy]) => window.scrollTo(0, document.querySelector(s).getBoundingClientRect().top"
        " + window.scrollY + dy)",
        [selector, offset],
    )


def shoot_pages(
    page: Any, out: Path, runs: dict[str, dict[str, Any]], views: dict[str, Any]
) -> None:
    demo, steps = runs["demo"]["id"], runs["demo"]["total_steps"]
    step, group, prompt = views["step"], views["group"], views["prompt"]

    def save(name: str) -> None:
        page.wait_for_timeout(400)  # let the last redraw land
        page.screenshot(path=str(out / f"{name}.png"))
        print("shot", name)

    page.goto("/")
    expect(page.locator(f"tr[data-run-id='{demo}']")).to_be_visible()
    save("runs")
    page.goto("/runs/new")
    expect(page.locator("#presets .preset").first).to_be_visible()
    save("new-run")
    page.fill("#spec-text", BAD_SPEC)
    page.click("#submit-button")
    expect(page.locator("#errors li")).to_have_count(3)
    save("new-run-errors")

    page.goto(f"/runs/{demo}")
    expect(page.locator("#stream-state")).to_have_attribute("data-state", "ended")
    expect(page.locator("#page")).to_have_attribute("data-rendered-steps", str(steps))
    save("run")
    scroll_to(page, "#chart-spread-heatmap", offset=-90)
    for chart in ("chart-spread-heatmap", "chart-reward-heatmap", "chart-advantage-heatmap"):
        page.wait_for_function(HEATMAP_DRAWN_JS, arg=chart, timeout=30_000)
    save("run-distributions")

    page.goto(f"/runs/{demo}/steps/{step}")
    expect(page.locator(".scrubber .step-label")).to_contain_text(f"Step {step} /")
    expect(page.locator("#groups-summary")).to_contain_text("groups")
    scroll_to(page, "#scrubber")
    page.wait_for_function(HEATMAP_DRAWN_JS, arg="chart-spread-heatmap", timeout=30_000)
    save("run-step")

    page.goto(f"/runs/{demo}/steps/{step}/groups/{group}")
    expect(page.locator("article.completion").first).to_be_visible()
    save("group")
    page.goto(f"/runs/{demo}/prompts/{quote(prompt, safe='')}")
    expect(page.locator("#occurrences tbody tr").first).to_be_visible()
    save("prompt")
    page.goto(f"/compare?runs={demo},{runs['clone']['id']}")
    expect(page.locator("#compare-reward")).to_be_visible()
    save("compare")
    page.goto(f"/runs/{runs['failed']['id']}")
    expect(page.locator("#run-banner [role='alert']")).to_be_visible()
    save("run-failed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--step", type=int, default=150, help="step of the step and group views")
    args = parser.parse_args()
    # the failing run must reach the worker: the API's hub check would refuse it at submit
    no_hub_check = {"GRPO_CHECK_HUB_MODELS": "false"}
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_stack(Path(tmp) / "data", extra_env=no_hub_check) as stack,
    ):
        with stack.client() as api:
            runs = train_runs(api)
            group, prompt = pick_views(api, runs["demo"]["id"], args.step)
        views = {"step": args.step, "group": group, "prompt": prompt}
        print(json.dumps({name: run["id"] for name, run in runs.items()} | views))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_context(viewport=VIEWPORT, base_url=stack.url).new_page()
            shoot_pages(page, args.out, runs, views)
            browser.close()


if __name__ == "__main__":
    main()
