"""Live streams of one run share one reader: a client that stops reading is closed and
resumes, never waited for; a commit wakes the streams instead of the next poll."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import httpx
import pytest

from grpo.client import parse_sse
from tests.fixtures.service import tiny_spec
from tests.seed import go_and_finish, live_seeder
from tests.sse import SseEvent, follow_events, read_events
from tests.stack import REDIS_URL, Stack, create_pg_database, drop_pg_database, running_stack


@contextmanager
def parked_stack(tmp_path: Path, store: str, **env: str) -> Iterator[Stack]:
    """A service with no worker: runs stay queued until the seeder claims them."""
    url = create_pg_database() if store == "postgres" else None
    urls = {"database_url": url, "broker_url": REDIS_URL} if url else {}
    try:
        with running_stack(tmp_path / "data", with_worker=False, extra_env=env, **urls) as stack:
            yield stack
    finally:
        if url:
            drop_pg_database(url)


def stalled_stream(port: int, path: str) -> socket.socket:
    """A client that asks for the stream, then reads nothing (a tiny receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


HANG_S = 120
"""How long any wait here may take before it counts as a hang (all take seconds)."""


def read_from_open(
    client: httpx.Client, path: str, opened: threading.Event, upto: int | None
) -> list[SseEvent]:
    """read_events, setting `opened` once the stream has delivered every event stored when
    the test asked (up to id `upto`): from then on it waits for new ones."""
    events: list[SseEvent] = []
    with client.stream("GET", path, timeout=HANG_S) as response:
        response.raise_for_status()
        if not upto:
            opened.set()
        for event_id, kind, data in parse_sse(response.iter_lines()):
            events.append(SseEvent(event_id, kind, data))
            if event_id is not None and event_id >= (upto or 0):
                opened.set()
            if kind == "end":
                break
    return events


def follow_from_open(
    client: httpx.Client, path: str, opened: threading.Event, upto: int | None
) -> list[SseEvent]:
    """follow_events, with read_from_open's sign for its first connection."""
    events = read_from_open(client, path, opened, upto)
    if events and events[-1].kind == "end":
        return events
    ids = [e.id for e in events if e.id is not None]
    return events + follow_events(client, path, last_event_id=ids[-1] if ids else None)


def open_and_waiting(
    pool: ThreadPoolExecutor, read: Callable[..., list[SseEvent]], stack: Stack, path: str, n: int
) -> list[Future[list[SseEvent]]]:
    """n readers of the stream, once each has read what was there and now waits."""
    with stack.client() as client:
        upto = client.get(path.removesuffix("/events") + "/metrics").json()["last_event_id"]
    signs = [threading.Event() for _ in range(n)]
    readers = [pool.submit(read, stack.client(), path, sign, upto) for sign in signs]
    assert all(sign.wait(timeout=HANG_S) for sign in signs), "a stream never opened"
    return readers


def wait_for_step(client: httpx.Client, run_id: str, step: int) -> None:
    deadline = time.monotonic() + HANG_S
    while client.get(f"/api/runs/{run_id}").json()["step"] < step:
        assert time.monotonic() < deadline, f"run {run_id} never reached step {step}"
        time.sleep(0.05)


def read_until_closed(sock: socket.socket, timeout: float = 60) -> bytes:
    sock.settimeout(timeout)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def ids_of(events: list[SseEvent]) -> list[int]:
    return [e.id for e in events if e.id is not None]


def test_a_stalled_client_is_closed_and_resumes_while_the_others_get_every_event(
    tmp_path: Path,
) -> None:
    # 300 steps, each with a 32 KB log line: ~10 MB, more than the socket buffers hold
    # (up to 4 MB on each side), so the server's queue for the stalled stream fills.
    steps = 300
    with parked_stack(tmp_path, "embedded", GRPO_STREAM_QUEUE_EVENTS="64") as stack:
        with stack.client() as client:
            spec = tiny_spec(stack, max_steps=steps, resources={"queue": "parked"})
            run_id = client.post("/api/runs", json=spec).json()["id"]
            path = f"/api/runs/{run_id}/events"
            with (
                live_seeder(stack.env, run_id, steps, 0.005, 32_000) as proc,
                ThreadPoolExecutor(3) as pool,
            ):
                stalled = stalled_stream(int(stack.url.rsplit(":", 1)[1]), path)
                # every stream is open before the first step
                readers = open_and_waiting(pool, follow_from_open, stack, path, 3)
                stalled.settimeout(HANG_S)
                assert stalled.recv(1, socket.MSG_PEEK)  # its answer began (and stays unread)
                go_and_finish(proc)
                fast = [reader.result(timeout=120) for reader in readers]
            # The others got every event once, in order (reconnecting if they lagged too),
            # while the stalled client read nothing at all.
            assert ids_of(fast[0]) == ids_of(fast[1]) == ids_of(fast[2])
            everything = ids_of(fast[0])
            assert len([e for e in fast[0] if e.kind == "step"]) == steps

            raw = read_until_closed(stalled)
            assert b"event: end" not in raw, "the stalled client was not cut off"
            head = [int(line[4:]) for line in raw.split(b"\n") if line.startswith(b"id: ")]
            assert head == everything[: len(head)]
            tail = read_events(client, path, last_event_id=head[-1] if head else None)
            assert head + ids_of(tail) == everything
            assert tail[-1].kind == "end"


@pytest.mark.parametrize("store", ["embedded", "postgres"])
def test_a_commit_wakes_the_streams_long_before_the_next_poll(tmp_path: Path, store: str) -> None:
    # The next poll is an hour away: a step reaches a waiting stream only if its commit
    # wakes the stream (a hang is bounded by HANG_S).
    with parked_stack(tmp_path, store, GRPO_STREAM_POLL_SECONDS="3600") as stack:
        with stack.client() as client:
            spec = tiny_spec(stack, max_steps=10, resources={"queue": "parked"})
            run_id = client.post("/api/runs", json=spec).json()["id"]
            path = f"/api/runs/{run_id}/events"
            with live_seeder(stack.env, run_id, 10, 0.2) as proc, ThreadPoolExecutor(2) as pool:
                readers = open_and_waiting(pool, read_from_open, stack, path, 2)
                go_and_finish(proc)
                streams = [reader.result(timeout=HANG_S) for reader in readers]
    for events in streams:  # on the one connection each opened before the first step
        assert [e.data["step"] for e in events if e.kind == "step"] == list(range(1, 11))
        assert events[-1].kind == "end"


def test_streams_joining_at_any_moment_from_any_id_get_exactly_what_follows_it(
    tmp_path: Path,
) -> None:
    # Late joiners from 0 catch up from the database and then hand over to the run's feed;
    # joiners from a recent id start from the feed's ring: neither may lose or repeat one.
    with parked_stack(tmp_path, "embedded") as stack, stack.client() as client:
        spec = tiny_spec(stack, max_steps=120, resources={"queue": "parked"})
        run_id = client.post("/api/runs", json=spec).json()["id"]
        path = f"/api/runs/{run_id}/events"
        seeding = live_seeder(stack.env, run_id, 120, 0.02)
        with seeding as proc, ThreadPoolExecutor(12) as pool:
            first = pool.submit(follow_events, stack.client(), path)
            go = pool.submit(go_and_finish, proc)
            joiners = []
            for k in range(1, 6):  # joining at steps 20, 40, ..., 100 of 120
                wait_for_step(client, run_id, 20 * k)
                recent = client.get(f"/api/runs/{run_id}/metrics").json()["last_event_id"]
                joiners.append((0, pool.submit(follow_events, stack.client(), path)))
                from_recent = partial(follow_events, last_event_id=recent)
                joiners.append((recent, pool.submit(from_recent, stack.client(), path)))
            go.result(timeout=120)
            everything = ids_of(first.result(timeout=120))
        assert len(everything) == len(set(everything)) >= 120
        for after, joiner in joiners:
            assert ids_of(joiner.result(timeout=120)) == [i for i in everything if i > after]
