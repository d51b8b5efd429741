"""Start the real service for tests: migrations, a `celery worker` process and the API
(`python -m app.server`: uvicorn with a header read timeout).

Used by integration and browser tests; nothing here mocks our code.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/15"
# One torch thread in every service process a test starts, as tests/conftest.py's
# one_torch_thread gives the test process: tiny-model ops gain nothing from a second
# intra-op thread, and on the 2-core runner, beside the API and the test, its spinning made
# a worker's training 3-5x slower (the demo's first 40 steps: 18-19 s with one thread,
# 65-95 s with two, `grpo train`, measured alternately under load 3).
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    """A running service: its URL, its environment, and its processes."""

    url: str
    env: dict[str, str]
    data_dir: Path
    queue: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    api_wrapper: list[str] = field(default_factory=list)
    """A command the API process runs under (a mount namespace of its own, say)."""

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)  # type: ignore[arg-type]

    def start_worker(
        self,
        name: str = "worker",
        *,
        queue: str | None = None,
        devices: str | None = None,
        is_own_group: bool = False,
        extra_env: dict[str, str] | None = None,
        wrapper: list[str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """`is_own_group`: in a process group of its own, as a terminal's job, for a test to
        signal the group as Ctrl-C does; `extra_env`: on top of the stack's environment;
        `wrapper`: a command the worker runs under (`ip netns exec HOST`: tests/hosts.py)."""
        log = open(self.data_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        held = ["--devices", devices] if devices else []
        proc = subprocess.Popen(
            [
                *(wrapper or []),
                sys.executable,
                "-m",
                "worker.cli",
                "--queue",
                queue or self.queue,
                "--hostname",
                f"{name}-{uuid.uuid4().hex[:6]}@%h",
                "--loglevel",
                "INFO",
                *held,
            ],
            cwd=ROOT,
            env={**self.env, **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            process_group=0 if is_own_group else None,
        )
        self.processes[name] = proc
        return proc

    def start_api(self, *, workers: int = 1) -> None:
        host, port = self.url.rsplit("//", 1)[1].rsplit(":", 1)
        log = open(self.data_dir / "api.log", "ab")  # noqa: SIM115
        self.processes["api"] = subprocess.Popen(
            [
                *self.api_wrapper,
                sys.executable,
                "-m",
                "app.server",
                "--host",
                host,
                "--port",
                port,
                "--log-level",
                "warning",
                "--workers",
                str(workers),
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_healthy(self.url, process=self.processes["api"])

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()

    def rows(self, stmt: Any) -> list[Any]:
        """The rows a SELECT finds in the stack's store (PostgreSQL, or its SQLite file), read
        past the API as a test's check of what was stored."""
        url = self.env.get("GRPO_DATABASE_URL") or f"sqlite:///{self.data_dir / 'grpo.db'}"
        engine = create_engine(url)
        try:
            with engine.connect() as connection:
                return list(connection.execute(stmt))
        finally:
            engine.dispose()

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in self.data_dir.glob("*.log")
        )


@dataclass
class RedisServer:
    """A redis-server of the test's own on a free port (never the machine's shared one), with
    no persistence: stopping it loses every queued message, as a crashed broker would."""

    port: int
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.data_dir)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise TimeoutError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@contextmanager
def own_redis(data_dir: Path) -> Iterator[RedisServer]:
    server = RedisServer(port=free_port(), data_dir=data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def grpo_up(
    workdir: Path, *, extra_env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`grpo up` as a user starts it (data in workdir/data), in its own process group so a
    test can signal the group as a terminal's Ctrl-C does; yields it and its URL once
    healthy, and kills whatever is left at the end."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    if "GRPO_CACHE_DIR" in os.environ:
        env["GRPO_CACHE_DIR"] = os.environ["GRPO_CACHE_DIR"]
    env.update(GRPO_DATA_DIR=str(workdir / "data"), GRPO_PORT=str(port), PYTHONUNBUFFERED="1")
    env.update(ONE_THREAD)
    env.update(extra_env or {})
    log = open(workdir / f"up-{port}.log", "a")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "grpo"), "up"],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process=proc)
        yield proc, url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


def wait_healthy(
    url: str, timeout: float = 240, process: subprocess.Popen[Any] | None = None
) -> None:
    """Until the API at `url` answers its health check. The bound is for an API that never
    comes up, not a slow one: one start took over 60 s beside four other test runs on this
    2-core machine. A `process` that exits ends the wait at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the service at {url} exited ({process.returncode}) unhealthy")
        time.sleep(0.3)
    raise TimeoutError(f"service at {url} not healthy after {timeout}s")


_MIGRATING = threading.Lock()
"""Alembic's `context` is one module-level object: one migration at a time per process."""


def migrate(env: dict[str, str]) -> None:
    """Bring the store `env` names (GRPO_DATABASE_URL, else the SQLite file in
    GRPO_DATA_DIR, as app/settings.py resolves it) to the latest migration, in this process
    as `grpo up` does (app/cli.py): a `python -m alembic upgrade head` per stack cost ~1 s of
    CPU to import, for ~0.04 s of migrating a fresh SQLite file."""
    from app.cli import migrate as upgrade
    from app.settings import Settings

    url = Settings(
        data_dir=Path(env.get("GRPO_DATA_DIR", "data")),
        database_url=env.get("GRPO_DATABASE_URL"),
    ).resolved_database_url
    with _MIGRATING:
        path = sys.path[:]
        try:
            upgrade(url)
        finally:
            sys.path[:] = path  # alembic.ini's prepend_sys_path, added again by each call


def create_pg_database(template: str | None = None) -> str:
    """A fresh PostgreSQL database for one test session; returns its URL. From `template`
    (another's URL, no one connected to it): a copy of it, schema and rows."""
    from sqlalchemy import create_engine, text

    name = f"grpo_test_{uuid.uuid4().hex[:10]}"
    copy = f' TEMPLATE "{template.rsplit("/", 1)[1]}"' if template else ""
    engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    engine.dispose()
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def drop_pg_database(url: str) -> None:
    from sqlalchemy import create_engine, text

    name = url.rsplit("/", 1)[1]
    engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@contextmanager
def pg_database(template: str | None = None) -> Iterator[str]:
    """A fresh PostgreSQL database (its URL) for the block, dropped after it."""
    url = create_pg_database(template)
    try:
        yield url
    finally:
        drop_pg_database(url)


@contextmanager
def running_stack(
    data_dir: Path,
    *,
    database_url: str | None = None,
    broker_url: str | None = None,
    extra_env: dict[str, str] | None = None,
    with_worker: bool = True,
    api_workers: int = 1,
    api_wrapper: list[str] | None = None,
    host: str = "127.0.0.1",
) -> Iterator[Stack]:
    """The embedded default when no URLs are given; PostgreSQL/Redis when they are. The
    API listens on `host` (a bridge's address for tests/hosts.py's hosts to reach it)."""
    # Embedded brokers live in data_dir, so "default" is private; Redis is shared: isolate.
    queue = f"q-{uuid.uuid4().hex[:8]}" if broker_url else "default"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update(
        {
            "GRPO_DATA_DIR": str(data_dir),
            "GRPO_DEFAULT_QUEUE": queue,
            "PYTHONUNBUFFERED": "1",
            **ONE_THREAD,
            # W&B (runs with report_to: [wandb]) offline, its own files in the data dir
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            "WANDB_CONFIG_DIR": str(data_dir / "wandb-home"),
            "WANDB_CACHE_DIR": str(data_dir / "wandb-home"),
            "WANDB_DATA_DIR": str(data_dir / "wandb-home"),
            **(extra_env or {}),
        }
    )
    if "GRPO_CACHE_DIR" in os.environ:
        env["GRPO_CACHE_DIR"] = os.environ["GRPO_CACHE_DIR"]
    if database_url:
        env["GRPO_DATABASE_URL"] = database_url
    if broker_url:
        env["GRPO_BROKER_URL"] = broker_url
    if host != "127.0.0.1":
        env["GRPO_HOST"] = host  # the API answers to its bind address (app/api/guards.py)
    data_dir.mkdir(parents=True, exist_ok=True)
    migrate(env)
    stack = Stack(
        url=f"http://{host}:{free_port(host)}",
        env=env,
        data_dir=data_dir,
        queue=queue,
        api_wrapper=api_wrapper or [],
    )
    try:
        stack.start_api(workers=api_workers)
        if with_worker:
            stack.start_worker()
        yield stack
    finally:
        stack.stop()
