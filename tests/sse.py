"""Read a Server-Sent Events stream the way a browser's EventSource does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from grpo.client import parse_sse


@dataclass(frozen=True)
class SseEvent:
    id: int | None
    kind: str
    data: Any


def read_events(
    client: httpx.Client,
    path: str,
    *,
    last_event_id: int | None = None,
    max_events: int | None = None,
    timeout: float = 300,
) -> list[SseEvent]:
    """Events until the server ends the stream (event `end`) or max_events arrive."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    events: list[SseEvent] = []
    with client.stream("GET", path, headers=headers, timeout=timeout) as response:
        response.raise_for_status()
        for event_id, kind, data in parse_sse(response.iter_lines()):
            events.append(SseEvent(event_id, kind, data))
            if kind == "end" or (max_events and len(events) >= max_events):
                break
    return events


def follow_events(
    client: httpx.Client, path: str, *, last_event_id: int | None = None, timeout: float = 300
) -> list[SseEvent]:
    """Every event (after last_event_id) until `end`, reconnecting with Last-Event-ID whenever
    the server closes the stream first (as the dashboard and the CLI do)."""
    events: list[SseEvent] = []
    while not events or events[-1].kind != "end":
        seen = (e.id for e in reversed(events) if e.id is not None)
        last = next(seen, last_event_id)
        events += read_events(client, path, last_event_id=last, timeout=timeout)
    return events
