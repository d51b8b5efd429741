"""With API tokens configured, the token is asked once, kept in the browser and sent on writes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import VIEWPORT, Console
from tests.stack import Stack, running_stack

TOKEN = "browser-test-token"


@pytest.fixture(scope="module")
def token_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # no worker: submitted runs stay queued, which is all these tests need
    with running_stack(
        tmp_path_factory.mktemp("tokens"), extra_env={"GRPO_API_TOKENS": TOKEN}, with_worker=False
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
