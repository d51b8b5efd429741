"""The run page of a run whose reward plugin raised shows why, where it shows the error: the
exception's type and message and the last frames of its traceback, the plugin's line that
raised last; the run's log panel has the traceback too. No secret of the worker shows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import Console
from tests.runs import small_spec, submit, wait_for_run
from tests.stack import Stack
from tests.worker.failing_plugin import PASSWORD, RAISING_LINE, REWARDS, TOKEN, failing_plugin_stack


@pytest.fixture(scope="module")
def plugin_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Path]]:
    with failing_plugin_stack(tmp_path_factory.mktemp("cause-page")) as running:
        yield running


@pytest.fixture(scope="module")
def ui_stack(plugin_stack: tuple[Stack, Path]) -> Stack:
    """This module's pages are served by the service with the failing plugin installed (the
    suite's `ui_stack` has none)."""
    return plugin_stack[0]


def test_the_run_page_shows_the_exception_and_the_plugins_frame(
    page: Any,
    ui_stack: Stack,
    plugin_stack: tuple[Stack, Path],
    console: Console,
    shoot: Callable[[Any, str], None],
) -> None:
    _, module = plugin_stack
    with ui_stack.client() as api:
        run = submit(api, small_spec(name="browser-cause", max_steps=2, rewards=REWARDS))
        wait_for_run(api, run["id"], lambda shown: shown["status"] == "failed")

    page.goto(f"/runs/{run['id']}")
    banner = page.locator("#run-banner .banner-error")
    expect(banner.locator(".banner-error-text")).to_contain_text(
        "reward function 'fails' failed at step 1: LookupError: no grader for 12 completions"
    )
    cause = banner.locator("details.cause")
    expect(cause).to_have_attribute("open", "")
    expect(cause.locator(".cause-exception")).to_have_text(
        "LookupError: no grader for 12 completions: token *** refused by "
        "https://grader:***@grader.example/score"
    )
    frames = cause.locator(".cause-frame")
    expect(frames.last.locator(".cause-where")).to_have_text(f"{module}:{RAISING_LINE}")
    expect(frames.last.locator(".cause-function")).to_have_text("_grade")
    expect(frames.last.locator(".cause-code")).to_have_text("raise LookupError(")
    expect(frames.nth(frames.count() - 2).locator(".cause-function")).to_have_text("fails")
    shoot(page, "run-failed-cause")

    trace = page.locator("#logs .log-error .log-message", has_text="Traceback")
    expect(trace).to_contain_text(f'File "{module}", line {RAISING_LINE}, in _grade')
    shown = page.locator("body").inner_text()
    assert TOKEN not in shown and PASSWORD not in shown
    assert console.unexpected() == []
