"""With API tokens configured, the token is asked once, kept in the browser and sent on writes;
where reads need it too, the export menu still downloads (with the token, not a bare link)
and the new-run page asks for it, then has its presets and its field help (the OpenAPI
document, read with the token); where reads do not, the model download (which always does)
says a token is needed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import VIEWPORT, Console
from tests.stack import ROOT, Stack, running_stack

TOKEN = "browser-test-token"


@pytest.fixture(scope="module")
def token_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # no worker: submitted runs stay queued, which is all these tests need
    with running_stack(
        tmp_path_factory.mktemp("tokens"), extra_env={"GRPO_API_TOKENS": TOKEN}, with_worker=False
    ) as stack:
        yield stack


@pytest.fixture(scope="module")
def read_token_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {"GRPO_API_TOKENS": TOKEN, "GRPO_READ_REQUIRES_TOKEN": "true"}
    with running_stack(
        tmp_path_factory.mktemp("read-tokens"), extra_env=env, with_worker=False
    ) as stack:
        yield stack


def test_token_is_asked_once_then_kept_for_every_write(
    browser: Any, token_stack: Stack, console: Console
) -> None:
    context = browser.new_context(viewport=VIEWPORT, base_url=token_stack.url)
    page = context.new_page()
    page.on("console", console.record)
    page.on("dialog", lambda dialog: dialog.accept())
    try:
        page.goto("/")
        expect(page.locator("#token-button")).to_contain_text("API token")
        page.click("#demo-button")
        dialog = page.locator("#token-dialog")
        expect(dialog).to_be_visible()
        expect(dialog.locator("#token-reason")).to_contain_text("requires an API token")
        page.fill("#token-input", TOKEN)
        dialog.locator("button[value='save']").click()

        page.wait_for_url(re.compile(r"/runs/[0-9a-f]+$"))
        assert page.evaluate("localStorage.getItem('grpo.apiToken')") == TOKEN
        expect(page.locator("#token-button")).to_contain_text("Token set")
        page.click("#run-head button[data-action='cancel']")
        expect(page.locator("#run-head .pill")).to_have_text(re.compile("cancel", re.I))
        expect(dialog).to_be_hidden()
    finally:
        context.close()
    assert console.unexpected(allowed=("status of 401",)) == []


def test_exports_download_with_the_stored_token_when_reads_require_one(
    browser: Any, read_token_stack: Stack, console: Console
) -> None:
    stack = read_token_stack
    seeded = subprocess.run(
        [sys.executable, "-m", "tests.seed", "5"],
        cwd=ROOT, env=stack.env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    run_id = seeded.stdout.split()[-1]
    export = f"{stack.url}/api/runs/{run_id}/export"
    assert httpx.get(export).status_code == 401  # what a bare link would download

    context = browser.new_context(viewport=VIEWPORT, base_url=stack.url, accept_downloads=True)
    context.add_init_script(f"localStorage.setItem('grpo.apiToken', '{TOKEN}')")
    page = context.new_page()
    page.on("console", console.record)
    try:
        page.goto(f"/runs/{run_id}")
        expect(page.locator("#run-name")).to_have_text("seeded-5")
        files = {}
        for label in ("Metrics · CSV", "Metrics · JSONL"):
            # the header redraws as the run's state arrives and keeps an open menu open: open
            # it only when it is closed (a click on an open menu's summary closes it)
            menu = page.locator("#run-head details.menu")
            if not menu.evaluate("m => m.open"):
                menu.locator("summary").click()
            expect(page.get_by_role("link", name=label)).to_be_visible()
            with page.expect_download() as info:
                page.get_by_role("link", name=label).click()
            download = info.value
            files[download.suggested_filename] = Path(download.path()).read_text()
    finally:
        context.close()

    assert set(files) == {f"{run_id}-metrics.csv", f"{run_id}-metrics.jsonl"}
    csv_lines = files[f"{run_id}-metrics.csv"].splitlines()
    assert csv_lines[0].startswith("step,") and "reward" in csv_lines[0].split(",")
    assert [line.split(",")[0] for line in csv_lines[1:]] == ["1", "2", "3", "4", "5"]
    rows = [json.loads(line) for line in files[f"{run_id}-metrics.jsonl"].splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3, 4, 5]
    assert all(sum(row["group_reward_std_histogram"]) == 8 for row in rows)
    assert console.unexpected() == []


def test_the_new_run_page_asks_for_the_token_then_has_presets_and_field_help(
    browser: Any, read_token_stack: Stack, console: Console
) -> None:
    stack = read_token_stack
    assert httpx.get(f"{stack.url}/api/presets").status_code == 401
    assert httpx.get(f"{stack.url}/openapi.json").status_code == 401
    context = browser.new_context(viewport=VIEWPORT, base_url=stack.url)
    page = context.new_page()
    page.on("console", console.record)
    try:
        page.goto("/runs/new")
        dialog = page.locator("#token-dialog")
        expect(dialog.locator("#token-reason")).to_contain_text("requires an API token for reads")
        page.fill("#token-input", TOKEN)
        dialog.locator("button[value='save']").click()

        first = page.locator("#presets .preset").first
        expect(first).to_have_attribute("data-preset", "arith-demo")
        expect(page.locator("#spec-text")).to_have_value(re.compile(r"name: arith-demo"))
        page.locator("#spec-text").click()
        page.keyboard.press("Control+Home")
        expect(page.locator("#field-path")).to_have_text("name")
        expect(page.locator("#field-help dt").first).to_have_text("type")
    finally:
        context.close()
    assert console.unexpected(allowed=("status of 401",)) == []


def test_a_model_download_refused_for_want_of_a_token_says_so(
    browser: Any, token_stack: Stack, console: Console
) -> None:
    seeded = subprocess.run(
        [sys.executable, "-m", "tests.seed", "2"],
        cwd=ROOT, env=token_stack.env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    run_id = seeded.stdout.split()[-1]
    context = browser.new_context(viewport=VIEWPORT, base_url=token_stack.url)
    page = context.new_page()
    page.on("console", console.record)
    try:
        page.goto(f"/runs/{run_id}")  # reads are open: the page loads without a token
        expect(page.locator("#run-name")).to_have_text("seeded-2")
        page.locator("#run-head details.menu summary").click()
        model = page.get_by_role("link", name="Model · latest checkpoint (.tar.gz)")
        model.click()
        dialog = page.locator("#token-dialog")
        expect(dialog.locator("#token-reason")).to_contain_text("API token for model downloads")
        dialog.locator("button[value='cancel']").click()
        expect(model).to_contain_text("API token needed")
        expect(page.locator(".toast")).to_contain_text("Set one with the API token button")
    finally:
        context.close()
    assert console.unexpected(allowed=("status of 401",)) == []
