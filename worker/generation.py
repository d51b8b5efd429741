"""`grpo worker --generation`: a worker that holds generation devices (or CPU slots) and
starts, for each claim of a `vllm_mode: server` run submitted with no server address, a vLLM
server of its own (`grpo vllm-serve`, grpo/cli/vllm_serve.py), publishes its URL for the
training worker (app/store/generation.py) and stops it once the claim is over: the run
succeeded, failed, was cancelled, handed back or claimed again. One server at a time.

It is no Celery worker: it takes runs from the store, polling. It reports itself as the
training workers do, with role `generation` and what it serves (run id, model, URL), so
GET /api/workers lists it. Its servers listen on its host (`--serve-host`, default
GRPO_WORKER_ADDRESS, else 127.0.0.1): with its machine's address, training workers on other
machines train on them (the weights then go over the network: grpo/engines/vllm_push.py).
A server that exits on its own is one warning line (with the end of its log) and its URL is
withdrawn: the trainer's next call fails within vllm_server_timeout and the run goes back to
the queue (worker/placement.py). It refuses to start (exit code 2) on a serve host that
GRPO_VLLM_SERVER_HOSTS does not allow on every port: training workers would refuse its
servers' URLs. The server dies with this process, its whole process group
(`GUARD`), and is ended so on every stop.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import httpx

from app.settings import get_settings
from app.store import db, generation, workers
from app.store.generation import GENERATION_ROLE, GenerationClaim
from grpo.engines.registry import available_engines
from grpo.spec import JobSpec
from grpo.spec.endpoints import endpoint_url_problem, is_allowed_host, url_host
from worker.address import free_port
from worker.device import device_label, free_memory_mb, held_devices

log = logging.getLogger(__name__)
POLL_S = 1.0
STOP_GRACE_S = 10.0
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
PR_SET_PDEATHSIG = 1


class GenerationWorker:
    """One generation worker: its name, the host its servers listen on, and `serve_args`
    added to every server's `vllm serve` options."""

    def __init__(self, name: str, *, host: str, serve_args: str) -> None:
        self.name, self.host, self.serve_args = name, host.strip("[]"), serve_args
        self.stop = threading.Event()
        self.serving: dict[str, str] | None = None

    def run(self) -> int:
        """Serve claims until SIGTERM or SIGINT; 0 then."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop.set())
        self.report()
        threading.Thread(target=self._report_loop, name="generation-report", daemon=True).start()
        log.info("generation worker %s: ready, servers on %s", self.name, self.host)
        try:
            while not self.stop.is_set():
                claim = self._take()
                if claim is None:
                    self.stop.wait(POLL_S)
                else:
                    self.serve(claim)
        finally:
            db.call(workers.forget_worker, self.name)
        log.info("generation worker %s: stopped", self.name)
        return 0

    def _take(self) -> GenerationClaim | None:
        try:
            return db.call(generation.take_run, self.name)
        except Exception:  # noqa: BLE001 - a failed poll must not end the worker
            log.exception("generation worker: could not look for runs; retrying")
            self.stop.wait(5 * POLL_S)
            return None

    def report(self) -> None:
        holds = held_devices()
        device = device_label()
        serving = self.serving
        db.call(
            workers.report_worker, self.name, queues="", device=device, device_kind=holds.kind,
            devices=list(holds.ids), engines=available_engines(),
            free_memory_mb=free_memory_mb(device), run_id=serving["run_id"] if serving else None,
            role=GENERATION_ROLE, serving=serving,
        )  # fmt: skip

    def _report_loop(self) -> None:
        settings = get_settings()
        every = min(settings.heartbeat_seconds, settings.stale_after_seconds / 3)
        while not self.stop.wait(every):
            try:
                self.report()
            except Exception:  # noqa: BLE001 - the next round tries again
                log.exception("generation worker: could not report itself; retrying")

    def serve(self, claim: GenerationClaim) -> None:
        """Start the claim's server, publish its URL once it answers, and stop it when the
        claim is over, the server exits, or this worker is told to stop."""
        spec = JobSpec.model_validate(claim.spec)
        port = free_port(self.host)
        url = server_url(self.host, port)
        logfile = Path.cwd() / f"vllm-{claim.run_id}-{claim.lease}.log"
        process = start_server(server_command(spec, self.host, port, self.serve_args), logfile)
        self.serving = {"run_id": claim.run_id, "model": spec.model, "url": url}
        log.info("run %s: started a vLLM server for %s at %s (pid %d)", claim.run_id,
                 spec.model, url, process.pid)  # fmt: skip
        try:
            self.report()
            self._watch(claim, process, url, logfile)
        finally:
            stop_server(process)
            self.serving = None
            db.call(generation.release, self.name, claim)
            logfile.unlink(missing_ok=True)
            self.report()

    def _watch(
        self, claim: GenerationClaim, process: subprocess.Popen[bytes], url: str, logfile: Path
    ) -> None:
        published = False
        while not self.stop.is_set():
            if process.poll() is not None:
                log.warning("run %s: its vLLM server at %s exited with code %s; its URL is "
                            "withdrawn and the run goes back to the queue. Its log ends: %s",
                            claim.run_id, url, process.returncode, tail(logfile))  # fmt: skip
                return
            if not db.call(generation.is_serving, self.name, claim):
                log.info("run %s: its claim is over; stopping its vLLM server", claim.run_id)
                return
            if not published and is_up(url):
                published = db.call(generation.publish_url, self.name, claim, url)
                log.info("run %s: its vLLM server answers at %s", claim.run_id, url)
            self.stop.wait(POLL_S)
        log.info("run %s: this worker is stopping; stopping its vLLM server", claim.run_id)


def server_url(host: str, port: int | None = None) -> str:
    """The URL of a server on `host` (an IPv6 one bracketed) and `port` (None: no port)."""
    netloc = url_host(host)
    return f"http://{netloc}" if port is None else f"http://{netloc}:{port}"


def serve_host_problem(host: str, allowed: Sequence[str]) -> str | None:
    """Why training workers would refuse the URLs of servers on `host`, checked as they check
    a run's server (grpo/spec/vllm.py's vllm_server_refusal) against `allowed`, this
    machine's GRPO_VLLM_SERVER_HOSTS; None when they take them. The URL names no port: each
    server takes a free one, so only an entry for the host itself (every port) allows all."""
    url = server_url(host.strip("[]"))
    if (problem := endpoint_url_problem(url)) is not None:
        return f"--serve-host {host!r} is no host a URL can name: {problem}"
    if is_allowed_host(url, allowed):
        return None
    return (
        f"its vLLM servers would listen on {host!r}, which GRPO_VLLM_SERVER_HOSTS does not "
        f"allow on every port (allowed: {', '.join(allowed) or 'none'}): training workers "
        "would refuse their URLs, failing the runs. Add the host (no port: each server takes "
        "a free one) to GRPO_VLLM_SERVER_HOSTS, here and on the training workers, or give "
        "--serve-host (or GRPO_WORKER_ADDRESS) a host it lists"
    )


def server_command(spec: JobSpec, host: str, port: int, serve_args: str) -> list[str]:
    """`grpo vllm-serve` for the run's model, precision, lengths and seed."""
    length = spec.vllm_max_model_length or spec.max_prompt_length + spec.max_completion_length
    command = [sys.executable, "-m", "grpo.cli", "vllm-serve", spec.model, "--host", host,
               "--port", str(port), "--dtype", DTYPES.get(spec.precision, "auto"),
               "--seed", str(spec.seed), "--max-model-len", str(length)]  # fmt: skip
    if spec.vllm_max_num_seqs is not None:
        command += ["--max-num-seqs", str(spec.vllm_max_num_seqs)]
    if spec.vllm_enforce_eager:
        command.append("--enforce-eager")
    if (cache := get_settings().cache_dir) is not None:
        command += ["--cache-dir", str(cache)]
    return command + (["--serve-args", serve_args] if serve_args else [])


GUARD = 'trap "kill -KILL 0" TERM; "$@" & wait $!'
"""The shell the server runs under, leader of its process group: a SIGTERM (this process's
stop, or its death: PR_SET_PDEATHSIG) kills the whole group. The server's own death signal
would not do: vLLM's engine core, a forked child of its API server, outlived a SIGKILL of
the API server (measured), so the group is killed, not the server."""


def start_server(command: list[str], logfile: Path) -> subprocess.Popen[bytes]:
    """The server in a process group of its own, killed whole when this process dies."""
    with logfile.open("wb") as out:
        return subprocess.Popen(
            ["bash", "-c", GUARD, "grpo-vllm-server", *command], stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_term_with_parent,
        )  # fmt: skip


def _term_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to its process group, SIGKILL past STOP_GRACE_S; what is left of the group
    (vLLM's engine core) is killed either way."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(STOP_GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(STOP_GRACE_S)


def is_up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).is_success
    except httpx.HTTPError:
        return False


def tail(logfile: Path, lines: int = 15) -> str:
    try:
        return " | ".join(logfile.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def serve_generation(name: str, *, host: str, serve_args: str) -> int:
    """Run a generation worker named `name` until told to stop; 2 without vLLM, or when its
    servers' host is one GRPO_VLLM_SERVER_HOSTS does not allow (`serve_host_problem`)."""
    if "vllm" not in available_engines():
        print("grpo worker --generation: vLLM is not installed here", file=sys.stderr)
        return 2
    if (problem := serve_host_problem(host, get_settings().vllm_server_host_list)) is not None:
        print(f"grpo worker --generation: {problem}", file=sys.stderr)
        return 2
    return GenerationWorker(name, host=host, serve_args=serve_args).run()
