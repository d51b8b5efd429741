"""A client that never finishes its headers is cut off (app/server.py): 100 idle sockets,
some silent and some stuck mid-header, are all closed by the server within the header
timeout, while a real client is served throughout (issue 25 item 8)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.stack import Stack, running_stack

TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {"GRPO_HEADER_TIMEOUT_SECONDS": str(TIMEOUT_S)}
    with running_stack(
        Path(tmp_path_factory.mktemp("slow")), extra_env=env, with_worker=False
    ) as s:
        yield s


def is_closed_by_server(sock: socket.socket, wait_s: float) -> bool:
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_hundred_idle_sockets_are_closed_and_real_clients_are_served(api: Stack) -> None:
    host, port = "127.0.0.1", int(api.url.rsplit(":", 1)[1])
    sockets = [socket.create_connection((host, port)) for _ in range(100)]
    for i, sock in enumerate(sockets[50:]):  # half send part of a request's headers
        sock.sendall(f"GET /api/health HTTP/1.1\r\nHost: {host}\r\nX-Slow-{i}: ".encode())
    started = time.monotonic()
    assert httpx.get(f"{api.url}/api/health", timeout=5).status_code == 200
    deadline = started + TIMEOUT_S + 5
    closed = [is_closed_by_server(s, max(0.05, deadline - time.monotonic())) for s in sockets]
    assert all(closed), f"{closed.count(False)} of 100 still open"
    assert time.monotonic() - started < TIMEOUT_S + 5
    for sock in sockets:
        sock.close()


def test_a_keep_alive_client_is_served_past_the_header_timeout(api: Stack) -> None:
    """The timer runs only while headers are awaited: a request whose answer takes longer,
    and a connection reused after idling below the keep-alive limit, are unaffected."""
    with httpx.Client(base_url=api.url, timeout=10) as client:
        ports = set()
        for _ in range(3):
            answer = client.get("/api/health")
            assert answer.status_code == 200
            ports.add(answer.extensions["network_stream"].get_extra_info("client_addr")[1])
            time.sleep(TIMEOUT_S / 2)
        assert len(ports) == 1
