"""A TCP forwarder, run as its own process by tests/hosts.py: it listens on an address of
this machine (the bridge's, which the namespace hosts reach) and copies each connection to
and from a service that listens on loopback only (the machine's PostgreSQL and Redis).

    python -m tests.forward LISTEN_HOST TARGET_HOST:PORT

prints the port it listens on (chosen by the kernel) once it listens, then serves until it
is terminated. Standard library only: it starts in tens of milliseconds.
"""

from __future__ import annotations

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # the other direction may still be answering
    except (ConnectionError, OSError):
        pass


async def serve(listen: str, target_host: str, target_port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            target_reader, target_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, target_writer), _pipe(target_reader, writer))
        finally:
            for w in (writer, target_writer):
                w.close()

    server = await asyncio.start_server(handle, listen, 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    listen, target = argv
    host, port = target.rsplit(":", 1)
    asyncio.run(serve(listen, host, int(port)))


if __name__ == "__main__":
    main(sys.argv[1:])
