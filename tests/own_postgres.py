"""A PostgreSQL cluster of the test's own (initdb + pg_ctl on a free port, in a temp
directory), for outage tests that stop the database: never the machine's shared one."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.stack import free_port

AS_POSTGRES = ["runuser", "-u", "postgres", "--"]  # initdb refuses to run as root


@dataclass
class PostgresServer:
    port: int
    directory: Path

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            [*AS_POSTGRES, "pg_ctl", "-D", str(self.directory / "data"), "-w", *args],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        self._pg_ctl("-o", options, "-l", str(self.directory / "server.log"), "start")

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "stop")


@contextmanager
def own_postgres() -> Iterator[PostgresServer]:
    directory = Path(tempfile.mkdtemp(prefix="grpo-pg-", dir="/tmp"))
    shutil.chown(directory, "postgres", "postgres")
    server = PostgresServer(port=free_port(), directory=directory)
    subprocess.run(
        [*AS_POSTGRES, "initdb", "-D", str(directory / "data"), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    server.start()
    try:
        yield server
    finally:
        try:
            server.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(directory, ignore_errors=True)
