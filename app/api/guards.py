"""Local-machine safety: which requests the server answers at all, before any route runs.

A web page in the user's browser can send requests to a service on loopback. Three checks
keep it out: the `Host` header must name this server (a DNS-rebinding page arrives under its
own name), a request with a foreign `Origin` is refused unless GRPO_ALLOWED_ORIGINS lists
it, and a write's body must be of the type its route reads, which a page cannot send without
the browser asking (CORS preflight) first: JSON, or JSONL for dataset uploads.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from app.settings import Settings

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
JSON_TYPES = ("application/json",)
JSONL_TYPES = ("application/x-ndjson", "application/jsonl")
PARQUET_TYPES = ("application/vnd.apache.parquet", "application/x-parquet")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """Host names this server answers to; None: any (bound to every interface, none listed)."""
    listed = {h.strip().lower() for h in settings.allowed_hosts.split(",") if h.strip()}
    if "*" in listed or (settings.host in WILDCARD_BINDS and not listed):
        return None
    return frozenset(listed | {settings.host.lower()} | LOOPBACK_NAMES)


def host_name(host: str) -> str:
    """`example.org:8000` -> `example.org`, `[::1]:8000` -> `::1`."""
    return (urlsplit(f"//{host}").hostname or "").lower()


def is_same_or_allowed_origin(origin: str, host: str, allowed: frozenset[str]) -> bool:
    if origin.rstrip("/").lower() in allowed:
        return True
    netloc = urlsplit(origin).netloc.lower()
    return bool(netloc) and netloc == host.lower()


def body_problem(path: str, content_type: str) -> str | None:
    """Why a write's body of this content type is refused, or None."""
    media = content_type.split(";", 1)[0].strip().lower()
    if path.rstrip("/") == "/api/datasets":
        if media in JSONL_TYPES or media in PARQUET_TYPES:
            return None
        return (
            f"dataset uploads are JSONL or parquet: send Content-Type: {JSONL_TYPES[0]} "
            f"or {PARQUET_TYPES[0]}"
        )
    if media in JSON_TYPES or media.endswith("+json"):
        return None
    return "request bodies are JSON: send Content-Type: application/json"


class RequestGuard:
    """Refuse a foreign Host (400), a foreign Origin (403) or a write body of the wrong
    content type (415) with the API's error shape."""

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.hosts = allowed_hosts(settings)
        self.origins = frozenset(
            o.strip().rstrip("/").lower() for o in settings.allowed_origins.split(",") if o.strip()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, code, message = refusal
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if self.hosts is not None and host and host_name(host) not in self.hosts:
            return (
                400,
                "bad_host",
                f"this server does not answer to host {host!r}"
                + (" (list it in GRPO_ALLOWED_HOSTS)"),
            )
        origin = headers.get("origin")
        if origin is not None and not is_same_or_allowed_origin(origin, host, self.origins):
            return (
                403,
                "forbidden_origin",
                (f"requests from origin {origin!r} are refused (list it in GRPO_ALLOWED_ORIGINS)"),
            )
        if scope["method"] in WRITE_METHODS and _has_body(headers):
            problem = body_problem(scope["path"], headers.get("content-type", ""))
            if problem:
                return 415, "unsupported_media_type", problem
        return None


def _has_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in headers
