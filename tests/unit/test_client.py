"""The REST client (app/client.py) against a real socket that drops every connection."""

from __future__ import annotations

import socket
import threading
import time

from app.client import RETRY_MIN_S, GrpoClient


def test_a_dropped_event_stream_is_retried_with_backoff_not_in_a_tight_loop() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[float] = []

    def drop_every_connection() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # the test closed the socket
            accepted.append(time.monotonic())
            conn.close()  # as a server that restarts: the link drops before any event

    threading.Thread(target=drop_every_connection, daemon=True).start()
    client = GrpoClient(f"http://127.0.0.1:{server.getsockname()[1]}")
    follower = threading.Thread(target=lambda: next(client.events("r1"), None), daemon=True)
    follower.start()
    time.sleep(2.0)
    server.close()
    # 0.5 s, then 1 s, then 2 s apart: three tries in two seconds (a tight loop made thousands)
    assert 2 <= len(accepted) <= 3, len(accepted)
    gaps = [b - a for a, b in zip(accepted, accepted[1:], strict=False)]
    assert all(gap >= RETRY_MIN_S * 0.9 for gap in gaps), gaps
    assert len(gaps) < 2 or gaps[1] > gaps[0]  # doubling
