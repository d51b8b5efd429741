"""Schemathesis hooks: how to put a generated dataset upload (JSONL text) on the wire."""

from __future__ import annotations

from typing import Any

import schemathesis


@schemathesis.serializer("application/x-ndjson", "application/jsonl")
def jsonl_body(_: Any, value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogatepass")
