"""Browser fixtures: the real service (embedded default: SQLite, filesystem broker, a real
`celery worker` process, uvicorn) and headless Debian Chromium driven by Playwright.

Nothing is mocked: the dashboard reads the same REST API and SSE stream as any client.
Set GRPO_SCREENSHOT_DIR to have the page tests save 1280x800 screenshots there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright import sync_api  # a test extra: missing is a failure, never a skip

from tests.browser.runs import finish, small_spec, submit
from tests.stack import Stack, running_stack

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("browser")) as running:
        yield running


@pytest.fixture(scope="session")
def api(stack: Stack) -> Iterator[httpx.Client]:
    with stack.client() as client:
        yield client


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail("Debian chromium is needed at /usr/bin/chromium (.ci/run installs it)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class Console:
    """Console errors and uncaught exceptions of one page."""

    errors: list[str] = field(default_factory=list)

    def record(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"{message.text} @ {message.location.get('url', '')}")

    def unexpected(self, allowed: tuple[str, ...] = ()) -> list[str]:
        return [e for e in self.errors if not any(a in e for a in allowed)]


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def page(browser: Any, stack: Stack, console: Console) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT, base_url=stack.url)
    opened = context.new_page()
    opened.on("console", console.record)
    opened.on("pageerror", lambda error: console.errors.append(f"uncaught: {error}"))
    yield opened
    context.close()


@pytest.fixture
def shoot() -> Callable[[Any, str], None]:
    """Saves a screenshot when GRPO_SCREENSHOT_DIR is set (how docs/screenshots/ is made)."""
    target = os.environ.get("GRPO_SCREENSHOT_DIR")

    def save(page: Any, name: str) -> None:
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(target) / f"{name}.png"))

    return save


@pytest.fixture(scope="session")
def finished_run(api: httpx.Client) -> dict[str, Any]:
    """A small run trained to the end, shared by the read-only page tests. The random model
    gets no sum right; "a digit anywhere" gives mixed groups, so the policy moves off the
    reference and tokens have a KL to shade."""
    rewards = [{"name": "accuracy"}, {"name": "regex", "pattern": r"\d", "weight": 0.5}]
    run = submit(api, small_spec(name="browser-finished", rewards=rewards))
    return finish(api, run["id"])
