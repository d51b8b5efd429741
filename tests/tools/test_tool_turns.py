"""Group inspector, agent runs (issue 28): a stored tool trajectory shows as its turns, the
assistant's text with its token count, each call with its arguments, each tool result shaded
as masked context, and the token view shades the masked tokens; all as the API holds them.
Its screenshot is docs/screenshots/group-tool-turns.png."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from tests.fixtures.browser import Console
from tests.runs import finish, submit

TOOLS_SPEC = {
    "name": "browser-tools",
    "model": "builtin:tiny-tools",
    "data": {"source": "builtin:tools"},
    "tools": [{"name": "python", "function": "calc"}],
    "max_tool_calling_iterations": 2,
    "rewards": [{"name": "python", "function": "final_answer"}],
    "max_steps": 2,
    "prompts_per_step": 4,
    "num_generations": 4,
    "max_prompt_length": 32,
    "max_completion_length": 80,
    "beta": 0.04,
    "save_steps": 0,
    "logging": {"max_groups_per_step": 4},
}


def test_a_tool_trajectory_shows_as_turns_with_masked_results(
    page: Any, ui_api: httpx.Client, console: Console, shoot: Callable[[Any, str], None]
) -> None:
    run = finish(ui_api, submit(ui_api, TOOLS_SPEC)["id"], timeout=600)
    assert run["status"] == "succeeded", run["error"]
    step, found = 2, None
    for group in ui_api.get(f"/api/runs/{run['id']}/steps/{step}/groups").json()["items"]:
        detail = ui_api.get(f"/api/runs/{run['id']}/steps/{step}/groups/{group['index']}").json()
        for rank, c in enumerate(detail["completions"]):
            if c["trajectory"] and c["trajectory"]["turns"][0]["calls"]:
                found = (group["index"], rank, c)
                break
        if found:
            break
    assert found is not None, "no stored trajectory called the tool"
    index, rank, completion = found
    page.goto(f"/runs/{run['id']}/steps/{step}/groups/{index}")
    row = page.locator("article.completion").nth(rank)
    row.locator(".turn").first.wait_for()
    turns = completion["trajectory"]["turns"]
    assert row.locator(".turn").count() == len(turns)
    first = row.locator(".turn").first
    assert first.locator(".turn-text").inner_text() == turns[0]["text"]
    assert f"{turns[0]['num_model_tokens']} tokens" in first.locator(".turn-head").inner_text()
    call = turns[0]["calls"][0]
    head = first.locator(".tool-call-head").first.inner_text()
    assert head == f"{call['name']} {json.dumps(call['arguments'], separators=(',', ':'))}"
    assert first.locator(".tool-result").first.inner_text() == turns[0]["results"][0]["content"]
    masked = row.locator(".tok-masked").evaluate_all("(s) => s.map((e) => e.textContent).join('')")
    expected = "".join(
        t for t, m in zip(completion["tokens"], completion["model_mask"], strict=True) if m == 0
    )
    assert masked == expected and "<tool_response>" in masked
    row.scroll_into_view_if_needed()
    shoot(page, "group-tool-turns")
    assert console.unexpected() == []
