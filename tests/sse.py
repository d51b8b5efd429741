"""Read a Server-Sent Events stream the way a browser's EventSource does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx


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
    fields: dict[str, str] = {}
    with client.stream("GET", path, headers=headers, timeout=timeout) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                key, _, value = line.partition(":")
                fields[key] = value.removeprefix(" ")
                continue
            if "data" in fields:
                event_id = int(fields["id"]) if "id" in fields else None
                events.append(
                    SseEvent(event_id, fields.get("event", "message"), json.loads(fields["data"]))
                )
                if events[-1].kind == "end" or (max_events and len(events) >= max_events):
                    break
            fields = {}
    return events
