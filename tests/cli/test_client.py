"""The REST client (grpo/client.py) against a real socket that drops every connection."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from grpo.client import RETRY_MIN_S, GrpoClient


def test_a_dropped_event_stream_is_retried_with_backoff_not_in_a_tight_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[float] = []
    third = threading.Event()

    def drop_every_connection() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # the test closed the socket
            accepted.append(time.monotonic())
            conn.close()  # as a server that restarts: the link drops before any event
            if len(accepted) == 3:
                third.set()

    waits: list[float] = []  # what the client asked to sleep between its tries
    real_sleep = time.sleep

    def sleep_and_note(seconds: float) -> None:
        if threading.current_thread() is follower:
            waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep_and_note)
    threading.Thread(target=drop_every_connection, daemon=True).start()
    client = GrpoClient(f"http://127.0.0.1:{server.getsockname()[1]}")
    follower = threading.Thread(target=lambda: next(client.events("r1"), None), daemon=True)
    follower.start()
    assert third.wait(timeout=60), f"{len(accepted)} tries in 60 s"  # 1.5 s when all is well
    server.close()
    # 0.5 s, then 1 s, then 2 s apart (a tight loop made thousands of tries)
    assert waits[:2] == [RETRY_MIN_S, 2 * RETRY_MIN_S], waits
    # each try came after the client's wait, whatever the load (a sleep never ends early;
    # the server noted a try before it dropped it, and the client waited after the drop)
    gaps = [b - a for a, b in zip(accepted, accepted[1:], strict=False)]
    assert all(gap >= wait for gap, wait in zip(gaps, waits, strict=False)), (gaps, waits)
