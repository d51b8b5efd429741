"""The lock between tests that change this machine's network and the browser tests
(tests/netlock.py): a change waits for open pages, and a page waits for a change that has
begun waiting, so pages on other xdist workers cannot keep a change out."""

from __future__ import annotations

import fcntl
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


class Holder:
    """A thread that holds the network (steady, or changing it) until told to leave; what it
    does goes to `events` in order."""

    def __init__(self, events: list[str], name: str, *, change: bool) -> None:
        self.entered, self.leave = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._body, args=(events, name, change))
        self.thread.start()

    def _body(self, events: list[str], name: str, change: bool) -> None:
        with netlock.changing_network() if change else netlock.steady_network():
            events.append(f"{name} in")
            self.entered.set()
            self.leave.wait(WAIT_S)
            events.append(f"{name} out")

    def wait_in(self) -> None:
        assert self.entered.wait(WAIT_S), "never got the network"

    def release(self) -> None:
        self.leave.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()


WAIT_S = 30
"""A deadline for a state that comes in milliseconds: only a hang reaches it."""


def is_held(path: Path) -> bool:
    """Whether another holder has an exclusive flock on `path` (flocks belong to an open
    file, so this probe's own open conflicts with a thread's of this process)."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_a_change_waits_for_open_pages_and_new_pages_wait_for_it() -> None:
    events: list[str] = []
    page1 = Holder(events, "page1", change=False)
    page1.wait_in()
    change = Holder(events, "change", change=True)
    deadline = time.monotonic() + WAIT_S
    while not is_held(netlock.GATE):  # the change has taken the gate: it waits for page1
        assert time.monotonic() < deadline, "the change never took the gate"
        time.sleep(0.01)
    page2 = Holder(events, "page2", change=False)
    # page2 must not share the network with page1 while the change waits (load can only
    # make this miss a broken gate, never fail a working one)
    assert not page2.entered.wait(0.5) and not change.entered.is_set()
    page1.release()
    change.wait_in()
    change.release()
    page2.wait_in()
    page2.release()
    assert events == ["page1 in", "page1 out", "change in", "change out", "page2 in", "page2 out"]


def test_pages_share_the_network_and_a_change_keeps_it_while_chromium_settles() -> None:
    events: list[str] = []
    pages = [Holder(events, f"page{i}", change=False) for i in range(2)]
    for page in pages:
        page.wait_in()  # both in, neither told to leave: they share it
    assert sorted(events) == ["page0 in", "page1 in"]
    for page in pages:
        page.release()
    started = time.monotonic()
    with netlock.changing_network():
        pass
    assert time.monotonic() - started >= netlock.SETTLE_S
