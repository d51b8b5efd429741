"""The lock between tests that change this machine's network and the browser tests
(tests/netlock.py): a change waits for open pages, and a page waits for a change that has
begun waiting, so pages on other xdist workers cannot keep a change out."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests import netlock


@pytest.fixture(autouse=True)
def _own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netlock, "GATE", tmp_path / "gate")
    monkeypatch.setattr(netlock, "LOCK", tmp_path / "lock")
    monkeypatch.setattr(netlock, "SETTLE_S", 0.2)


def _in_thread(events: list[str], name: str, hold: float, change: bool) -> threading.Thread:
    def body() -> None:
        with netlock.changing_network() if change else netlock.steady_network():
            events.append(f"{name} in")
            time.sleep(hold)
            events.append(f"{name} out")

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_a_change_waits_for_open_pages_and_new_pages_wait_for_it() -> None:
    events: list[str] = []
    first = _in_thread(events, "page1", 0.6, change=False)
    time.sleep(0.1)
    change = _in_thread(events, "change", 0.1, change=True)
    time.sleep(0.1)
    second = _in_thread(events, "page2", 0.1, change=False)
    for thread in (first, change, second):
        thread.join(timeout=10)
    assert events == ["page1 in", "page1 out", "change in", "change out", "page2 in", "page2 out"]


def test_pages_share_the_network_and_a_change_keeps_it_while_chromium_settles() -> None:
    events: list[str] = []
    pages = [_in_thread(events, f"page{i}", 0.3, change=False) for i in range(2)]
    time.sleep(0.1)
    assert events == ["page0 in", "page1 in"]
    for thread in pages:
        thread.join(timeout=10)
    started = time.monotonic()
    with netlock.changing_network():
        pass
    assert time.monotonic() - started >= netlock.SETTLE_S
