"""Service commands of the `grpo` CLI: up, migrate, plugins, and the client commands.

Reached from grpo.cli through a process boundary (python -m app.cli), so the library never
imports the server.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
from functools import partial
from pathlib import Path

from app.cli_plugins import add_parser as add_plugins_parser
from app.cli_plugins import plugins
from app.cli_rescore import add_parser as add_rescore_parser
from app.cli_rescore import rescore
from app.cli_rewards import add_parser as add_rewards_parser
from app.cli_rewards import rewards
from app.settings import get_settings
from app.supervisor import Child, Supervisor
from grpo.cli.commands import SUMMARIES

ROOT = Path(__file__).resolve().parent.parent
SUGGESTED_PORTS = 49
"""How many ports above a taken one `grpo up` looks through for one to suggest (`make docs`
serves on a port past them: tests/project/test_ports.py)."""


def migrate(database_url: str | None = None) -> None:
    """Bring the database schema to the latest migration (alembic upgrade head): the
    settings' database, or `database_url`'s."""
    from alembic import command
    from alembic.config import Config

    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["configure_logger"] = False
    if database_url is not None:
        config.attributes["database_url"] = database_url  # migrations/env.py reads it first
    command.upgrade(config, "head")


def port_problem(host: str, port: int) -> str | None:
    """Why the API cannot listen on host:port (taken, or not an address here), or None.
    Bound as uvicorn binds (SO_REUSEADDR), then closed at once."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return f"cannot listen on {host}:{port}: {exc.strerror}; set GRPO_HOST or --host"
        free = next(
            (p for p in range(port + 1, port + 1 + SUGGESTED_PORTS) if _is_free(host, p)), port + 1
        )
        return (
            f"port {port} on {host} is already in use (another GRPO Service, or another "
            f"program): set GRPO_PORT to a free port, e.g. `GRPO_PORT={free} make up` or "
            f"`grpo up --port {free}`"
        )
    return None


def _is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def up(*, host: str, port: int) -> int:
    """Migrate, then supervise one worker and the API until Ctrl-C; stop both cleanly.
    A port that is taken is one error line and exit 1, before anything else."""
    problem = port_problem(host, port)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
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
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=SUMMARIES[name], description=SUMMARIES[name])

    up_parser = command("up")
    up_parser.add_argument("--host", default=None, help="address to bind (default GRPO_HOST)")
    up_parser.add_argument("--port", type=int, default=None, help="port (default GRPO_PORT, 8000)")
    command("migrate")
    submit = command("submit")
    submit.add_argument("spec", help="the spec's YAML or JSON file; - reads it from stdin")
    submit.add_argument("--follow", "-f", action="store_true", help="follow with a progress bar")
    add_upload_option(submit)
    runs_parser = command("runs")
    runs_parser.add_argument("--status", default=None)
    for name in ("cancel", "logs", "doctor", "resume"):
        command(name).add_argument("run_id")
    clone = command("clone")
    clone.add_argument("run_id")
    clone.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a field of the spec (dotted for a section: data.split=test; the value "
        "is read as YAML: 0.1, true, [a, b]); repeatable",
    )
    clone.add_argument("--follow", "-f", action="store_true", help="follow with a progress bar")
    add_datasets_parser(command("datasets"))
    add_plugins_parser(command("plugins"))
    add_rewards_parser(command("rewards"), server_options=add_server_options)
    add_rescore_parser(command("rescore"))
    export = command("export")
    export.add_argument("run_id")
    export.add_argument("directory")
    export.add_argument("--step", default="latest", help="a checkpoint's step (default latest)")
    export.add_argument("--merge", action="store_true", help="LoRA: merged full weights")
    for name, client_parser in sub.choices.items():
        if name not in ("up", "migrate", "datasets", "plugins", "rewards"):  # on its actions
            add_server_options(client_parser)
    return parser


def add_datasets_parser(parser: argparse.ArgumentParser) -> None:
    """`grpo datasets upload FILE` and `grpo datasets list`."""
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    upload = actions.add_parser("upload", help="upload a JSONL file: one JSON record a line")
    upload.add_argument("file", help="the JSONL file")
    upload.add_argument("--name", default=None, help="a name to find it by (default: file name)")
    for field in ("prompt", "answer"):
        upload.add_argument(
            f"--{field}-field", default=field, help=f"the {field}'s key (default {field})"
        )
    actions.add_parser("list", help="uploaded datasets with their source names")
    for action in actions.choices.values():
        add_server_options(action)


def add_upload_option(parser: argparse.ArgumentParser) -> None:
    """`grpo submit --no-upload` (`grpo convert --submit --no-upload` hands it on)."""
    parser.add_argument(
        "--no-upload",
        dest="upload",
        action="store_false",
        help="send the spec as it is: a data.source or eval.source naming a file on this "
        "machine is not uploaded as a dataset first (by default it is, unless the server "
        "reads that path itself)",
    )


def add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None, help="server (default GRPO_URL)")
    parser.add_argument("--token", default=None, help="bearer token (default GRPO_TOKEN)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = get_settings()
    if args.command == "up":
        return up(host=args.host or settings.host, port=args.port or settings.port)
    if args.command == "migrate":
        migrate()
        return 0
    if args.command == "plugins":
        return plugins(args, settings)
    from app.cli_client import run_client_command
    from grpo.client import GrpoClient

    client = GrpoClient(args.url or settings.server_url, token=args.token or settings.token)
    if args.command == "rewards":
        return rewards(args, client)
    if args.command == "rescore":
        return rescore(args, client)
    return run_client_command(args, client)


if __name__ == "__main__":
    sys.exit(main())
