"""`grpo worker`: a Celery worker with the defaults a GPU job needs (solo pool, one job),
holding the devices it is given (`--devices`; see worker/device.py)."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import tempfile

from app.settings import get_settings
from grpo.parallel.threads import apply_threads, prefer_passive_wait
from worker.celery_app import celery_app
from worker.device import hold_devices, hold_threads, machine_devices
from worker.fork_server import fork_server_here
from worker.generation import serve_generation


def build_parser() -> argparse.ArgumentParser:
    """`grpo worker`'s parser (the CLI reference of the docs is written from it)."""
    parser = argparse.ArgumentParser(
        prog="grpo worker",
        description="start a Celery worker that trains runs: solo pool, one job at a time, "
        "prefetch 1, late acknowledgement",
    )
    parser.add_argument("--queue", "-Q", default=None, help="queue(s) to consume, comma-separated")
    parser.add_argument("--loglevel", "-l", default="INFO")
    parser.add_argument("--hostname", "-n", default=None)
    parser.add_argument(
        "--devices",
        default=None,
        help="GPU indices this worker holds, comma-separated (default: all it sees); without "
        "CUDA, a number of CPU slots (default: one per CPU). A run takes one device per rank.",
    )
    parser.add_argument(
        "--generation",
        action="store_true",
        help="a generation worker: it trains nothing, and starts (and stops) the vLLM server "
        "of each vllm_mode server run submitted with no server address (needs vLLM)",
    )
    parser.add_argument(
        "--serve-host",
        default=None,
        help="with --generation: the address its vLLM servers listen on and that training "
        "workers reach them at (a host GRPO_VLLM_SERVER_HOSTS allows; default "
        "GRPO_WORKER_ADDRESS, for training workers on other machines, else 127.0.0.1)",
    )
    parser.add_argument(
        "--serve-args",
        default="",
        help="with --generation: more `vllm serve` options for every server it starts, as one "
        "string: --serve-args '--kv-cache-memory-bytes 3e8'",
    )
    return parser


def settle_in_neutral_directory() -> None:
    """Run in an empty directory of the worker's own: a hub id (`org/name`, `hf:org/name`)
    is never read as a path under the directory the worker was started in (the hub
    libraries look there first), so `"model": "app/main.py"` fails exactly as a name that
    exists nowhere. The settings' relative paths keep the meaning they had where it was
    started: they are made absolute in the environment (which the ranks inherit) first."""
    settings = get_settings()
    os.environ["GRPO_DATA_DIR"] = str(settings.data_dir.resolve())
    if settings.cache_dir is not None:
        os.environ["GRPO_CACHE_DIR"] = str(settings.cache_dir.resolve())
    if settings.model_roots:
        os.environ["GRPO_MODEL_ROOTS"] = ",".join(str(p) for p in settings.model_root_list)
    if settings.database_url is None:
        os.environ["GRPO_DATABASE_URL"] = settings.resolved_database_url
    get_settings.cache_clear()
    os.chdir(tempfile.mkdtemp(prefix="grpo-worker-"))


def main(argv: list[str] | None = None) -> int:
    prefer_passive_wait()  # before torch loads (machine_devices imports it)
    parser = build_parser()
    args = parser.parse_args(argv)
    settle_in_neutral_directory()
    settings = get_settings()
    try:
        devices = machine_devices(args.devices or settings.worker_devices)
    except ValueError as exc:
        parser.error(str(exc))  # exits 2
    hold_devices(devices)
    threads = apply_threads(devices.kind, devices.count)
    hold_threads(threads)
    print(f"grpo worker: holds {devices.label}; {threads.label}", file=sys.stderr, flush=True)
    if args.generation:
        return _generation(args)
    fork_server_here()  # the run's code imported once, for the worker and its runs' processes
    worker_args = [
        "worker",
        "--pool",
        "solo",
        "--concurrency",
        "1",
        "--prefetch-multiplier",
        "1",
        "--queues",
        args.queue or settings.default_queue,
        "--loglevel",
        args.loglevel,
        "--without-mingle",
        "--without-gossip",
    ]
    if args.hostname:
        worker_args += ["--hostname", args.hostname]
    try:
        celery_app.worker_main(worker_args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    # Celery is done (tasks acked, connection closed); skip the interpreter's teardown of
    # torch and the rest, seconds of garbage collection on a busy machine, so a stop is prompt
    logging.shutdown()
    try:
        os.rmdir(os.getcwd())  # the neutral directory, empty unless something wrote there
    except OSError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _generation(args: argparse.Namespace) -> int:
    """A generation worker (worker/generation.py) in place of Celery's."""
    logging.basicConfig(
        level=args.loglevel.upper(), format="[%(asctime)s: %(levelname)s] %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per health check otherwise
    name = (args.hostname or f"generation@{socket.gethostname()}").replace(
        "%h", socket.gethostname()
    )
    host = args.serve_host or get_settings().worker_address or "127.0.0.1"
    return serve_generation(name, host=host, serve_args=args.serve_args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
