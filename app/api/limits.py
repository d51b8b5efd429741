"""Request body limits: its size, enforced before the body is read into memory, and its
pace, so that a client trickling a body cannot hold a connection for good."""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    """Raised from `receive` once a streamed (chunked) body passes the limit."""


class BodySizeLimit:
    """Answer 413 when a request body is larger than max_bytes (declared or streamed).

    Exempt paths (dataset uploads) enforce their own, larger limit.
    """

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, exempt_prefixes: tuple[str, ...] = ()
    ) -> None:
        self.app, self.max_bytes, self.exempt_prefixes = app, max_bytes, exempt_prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.exempt_prefixes):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        is_too_large = False
        is_started = False

        async def limited_receive() -> Message:
            nonlocal received, is_too_large
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                is_too_large = True
                raise BodyTooLarge(self.max_bytes)
            return message

        async def guarded_send(message: Message) -> None:
            # whatever the app answers to a body it could not finish reading (FastAPI: 400
            # "error parsing the body"), the answer to a chunked body past the limit is 413
            nonlocal is_started
            if not is_too_large:
                await send(message)
            elif message["type"] == "http.response.start" and not is_started:
                await self._reject(send)
            is_started = is_started or message["type"] == "http.response.start"

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            if not is_started:
                await self._reject(send)

    async def _reject(self, send: Send) -> None:
        body = json.dumps(
            {
                "error": {
                    "code": "payload_too_large",
                    "message": f"request body exceeds {self.max_bytes} bytes",
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


class BodyTimedOut(Exception):
    """Raised from `receive` once a request's body is late."""


class BodyTimeout:
    """Answer 408 and close the connection when a request's body arrives too slowly.

    The header timeout (app/server.py) ends once a request's headers are in; from then on
    uvicorn waits for the body as long as the client likes, so `Content-Length: 1000` and a
    byte every 5 s held a connection for good. Here the app's `receive` waits for the body
    at most `seconds` beyond what the bytes received so far earn at `min_rate` (each one buys
    1/min_rate s, Apache mod_reqtimeout's `body=...,MinRate=...`), and at most `seconds` for
    any one chunk. A trickle is cut after about `seconds`, whatever its size; an upload that
    keeps up `min_rate` (a 64 MB dataset over a slow link) is never cut, however long it
    takes, which a total cap would do to it. Only time spent waiting in `receive` counts, so
    a route that works before reading its body costs the client nothing.

    A request that declares no body, and every `receive` after the body's last chunk (a
    streaming response listening for the client to leave), is never timed. A route that
    never reads its body answers while the rest trickles in; the header timeout, armed
    again by that answer, then closes the connection.
    """

    def __init__(self, app: ASGIApp, *, seconds: float, min_rate: float) -> None:
        self.app, self.seconds, self.min_rate = app, seconds, min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not declares_body(scope):
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        waited = 0.0
        received = 0
        is_done = False
        is_late = False
        is_started = False

        async def timed_receive() -> Message:
            nonlocal waited, received, is_done, is_late
            if is_done:
                return await receive()
            if is_late:
                raise BodyTimedOut(self.seconds)
            budget = min(self.seconds, self.seconds + received / self.min_rate - waited)
            started = loop.time()
            try:
                async with asyncio.timeout(max(budget, 0.0)):
                    message = await receive()
            except TimeoutError:
                is_late = True
                raise BodyTimedOut(self.seconds) from None
            finally:
                waited += loop.time() - started
            received += len(message.get("body", b""))
            is_done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def guarded_send(message: Message) -> None:
            # whatever the app answers to a body it could not finish reading (FastAPI: 400
            # "error parsing the body", an upload's own handler: 500), the answer is 408
            nonlocal is_started
            if not is_late:
                await send(message)
            elif message["type"] == "http.response.start" and not is_started:
                await self._reject(send)
            is_started = is_started or message["type"] == "http.response.start"

        try:
            await self.app(scope, timed_receive, guarded_send)
        except Exception:
            # the timeout, or what the app made of it; an answer already under way cannot
            # become a 408: uvicorn drops the connection
            if not is_late or is_started:
                raise
        if is_late and not is_started:
            await self._reject(send)

    async def _reject(self, send: Send) -> None:
        message = (
            f"request body too slow: not complete within {self.seconds:g} s beyond "
            f"{self.min_rate:g} bytes a second (GRPO_BODY_TIMEOUT_SECONDS, "
            "GRPO_BODY_MIN_BYTES_PER_SECOND)"
        )
        body = json.dumps({"error": {"code": "request_timeout", "message": message}}).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 408, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def declares_body(scope: Scope) -> bool:
    """Whether the request's headers announce a body (a non-zero length, or chunks)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.strip() not in (b"", b"0"):
            return True
        if name == b"transfer-encoding":
            return True
    return False
