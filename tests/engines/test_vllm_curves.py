"""The run page of a use_vllm run (issue 27) charts vLLM's log-prob gap beside the KL: the
mean and max |trainer - vLLM| log-prob and the share of tokens the importance-sampling
correction truncated or masked, point for point the run's metrics; a native run has no such
card."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.sync_api import expect

from tests.charts import wait_points
from tests.fixtures.browser import Console
from tests.runs import finish, small_spec, submit

KEYS = ("generation/logprob_diff_mean", "generation/logprob_diff_max",
        "generation/is_corrected_share")  # fmt: skip


def test_the_logprob_gap_card_draws_a_vllm_runs_metrics(
    page: Any, ui_api: httpx.Client, finished_run: dict[str, Any], console: Console
) -> None:
    # eager: the card is the subject, not vLLM's compiled path (tests/engines/test_vllm_engine.py)
    spec = small_spec(name="browser-vllm", model="builtin:small", use_vllm=True,
                      vllm_enforce_eager=True, precision="fp32", max_steps=2,
                      save_steps=0)  # fmt: skip
    run = finish(ui_api, submit(ui_api, spec)["id"], timeout=900)
    metrics = [m for m in ui_api.get(f"/api/runs/{run['id']}/metrics").json()["items"]
               if KEYS[0] in m["metrics"]]  # fmt: skip
    assert [m["step"] for m in metrics] == [1, 2]
    page.goto(f"/runs/{run['id']}")
    expect(page.locator("#card-logprob-gap")).to_be_visible(timeout=30_000)
    page.locator("#card-logprob-gap").scroll_into_view_if_needed()
    for key in KEYS:
        drawn = wait_points(page, "chart-logprob-gap", key, len(metrics))
        assert drawn == [[m["step"], m["metrics"][key]] for m in metrics], key

    page.goto(f"/runs/{finished_run['id']}")
    wait_points(page, "chart-reward", "reward", finished_run["spec"]["max_steps"])
    expect(page.locator("#card-logprob-gap")).to_be_hidden()
    assert console.unexpected() == []
