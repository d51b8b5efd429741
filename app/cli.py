"""Service commands of the `grpo` CLI: up, migrate, and the client commands.

Reached from grpo.cli through a process boundary (python -m app.cli), so the library never
imports the server.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from functools import partial
from pathlib import Path

from app.settings import get_settings
from app.supervisor import Child, Supervisor

ROOT = Path(__file__).resolve().parent.parent


def migrate() -> None:
    """Bring the database schema to the latest migration (alembic upgrade head)."""
    from alembic import command
    from alembic.config import Config

    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")


def up(*, host: str, port: int) -> int:
    """Migrate, then supervise one worker and the API until Ctrl-C; stop both cleanly."""
    from app.queue import requeue_lost_runs  # loads Celery: not for the client commands
    from app.store import db

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    migrate()
    # the API answers to the Host it is bound to (app/api/guards.py)
    env = {**os.environ, "GRPO_DATA_DIR": str(settings.data_dir.resolve()), "GRPO_HOST": host}
    worker_name = f"worker-{os.getpid()}@{socket.gethostname()}"
    worker = Child(
        "worker",
        [sys.executable, "-m", "worker.cli", "--queue", settings.default_queue,
         "--hostname", worker_name],
        on_exit=partial(db.call, requeue_lost_runs, worker=worker_name),
    )  # fmt: skip
    api = Child(
        "API",
        [sys.executable, "-m", "app.server", "--host", host, "--port", str(port),
         "--log-level", "warning", "--workers", str(settings.resolved_api_processes)],
    )  # fmt: skip
    print(
        f"GRPO Service: dashboard at http://{host}:{port}  (data in {settings.data_dir.resolve()};"
        " Ctrl-C stops)",
        flush=True,
    )
    stop_within = settings.stop_grace_seconds + 10  # the worker's grace, then its exit
    return Supervisor([api, worker], env=env, cwd=ROOT, stop_within=stop_within).run()


def build_parser() -> argparse.ArgumentParser:
    """The service commands' parser (the CLI reference of the docs is written from it)."""
    parser = argparse.ArgumentParser(prog="grpo")
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up", help="start API, dashboard and one worker (embedded default)")
    up_parser.add_argument("--host", default=None)
    up_parser.add_argument("--port", type=int, default=None)
    sub.add_parser("migrate", help="alembic upgrade head")
    submit = sub.add_parser("submit", help="submit a spec (YAML or JSON) to the server")
    submit.add_argument("spec")
    submit.add_argument("--follow", "-f", action="store_true", help="follow with a progress bar")
    runs_parser = sub.add_parser("runs", help="list runs")
    runs_parser.add_argument("--status", default=None)
    for name in ("cancel", "logs"):
        sub.add_parser(name).add_argument("run_id")
    sub.add_parser(
        "doctor", help="what is going wrong with a run, the evidence, and what to change"
    ).add_argument("run_id")
    export = sub.add_parser("export", help="download a run's checkpoint model into a directory")
    export.add_argument("run_id")
    export.add_argument("directory")
    export.add_argument("--step", default="latest", help="a checkpoint's step (default latest)")
    export.add_argument("--merge", action="store_true", help="LoRA: merged full weights")
    for client_parser in (
        submit,
        runs_parser,
        export,
        *(sub.choices[n] for n in ("cancel", "logs", "doctor")),
    ):
        client_parser.add_argument("--url", default=None, help="server (default GRPO_URL)")
        client_parser.add_argument(
            "--token", default=None, help="bearer token (default GRPO_TOKEN)"
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = get_settings()
    if args.command == "up":
        return up(host=args.host or settings.host, port=args.port or settings.port)
    if args.command == "migrate":
        migrate()
        return 0
    from app.cli_client import run_client_command
    from app.client import GrpoClient

    client = GrpoClient(args.url or settings.server_url, token=args.token or settings.token)
    return run_client_command(args, client)


if __name__ == "__main__":
    sys.exit(main())
