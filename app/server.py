"""`python -m app.server`: uvicorn serving app.main:app, with a header read timeout.

uvicorn bounds the idle time between a connection's requests (keep-alive) but not the time
a client may take to send a request's headers: 100 sockets that never finish theirs stay
open for good (slowloris). Here a connection that has not completed a request's headers
within GRPO_HEADER_TIMEOUT_SECONDS of opening, or of its previous response, is closed.
`grpo up`, the Dockerfile's compose command and the tests start the API through this.

A stop (SIGINT, SIGTERM) closes the live event streams at once, so that the graceful stop,
which waits for open responses, does not wait for a dashboard to go away. The ASGI lifespan
is off: the app has no startup or shutdown work, and uvicorn's forced stop (a second
Ctrl-C) skips the lifespan's shutdown and leaves its task to be cancelled, which Starlette
logs as a CancelledError traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from typing import Any

if __name__ == "__mp_main__":
    # a worker process of `--workers N` (spawned: it imports this module again first). A
    # Ctrl-C reaches the whole process group, and one landing while this process still
    # imports printed a KeyboardInterrupt traceback: ignored until uvicorn installs its own
    # handlers as it starts serving; meanwhile the supervisor stops it with SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_IGN)

import uvicorn  # noqa: E402 - after the signal set-up above
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # noqa: E402

from app.api.run_feed import hub  # noqa: E402
from app.settings import get_settings  # noqa: E402


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose headers are late, and every
    live stream when the server stops."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.arm_header_timer()

    def on_headers_complete(self) -> None:
        self.disarm_header_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        is_pipelined = bool(self.pipeline)  # its next request's headers are already in
        super().on_response_complete()
        if not is_pipelined and not self.transport.is_closing():
            self.arm_header_timer()  # the next request's headers, from now

    def shutdown(self) -> None:
        hub.close_streams()  # called for each open connection as the server stops
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm_header_timer()
        super().connection_lost(exc)

    def arm_header_timer(self) -> None:
        self.disarm_header_timer()
        seconds = get_settings().header_timeout_seconds
        self.header_timer = self.loop.call_later(seconds, self.close_slow_headers)

    def disarm_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def close_slow_headers(self) -> None:
        self.header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app.server")
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--log-level", default="warning")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.host:  # the app's Host-header guard answers to the bound address: the setting's
        os.environ["GRPO_HOST"] = args.host
        get_settings.cache_clear()
    settings = get_settings()
    uvicorn.run(
        "app.main:app",
        host=args.host or settings.host,
        port=args.port or settings.port,
        workers=args.workers or settings.resolved_api_processes,
        log_level=args.log_level,
        http=HeaderTimeoutProtocol,
        lifespan="off",
    )


if __name__ == "__main__":
    main()
