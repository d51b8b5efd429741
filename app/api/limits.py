"""Request body size limit, enforced before the body is read into memory."""

from __future__ import annotations

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
