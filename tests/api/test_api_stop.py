"""The API process (`python -m app.server`) stops promptly and quietly: Ctrl-C with a
dashboard's live stream open closes that stream cleanly instead of waiting for it, and Ctrl-C
twice leaves no traceback in the log (one CI run of tests/worker/test_faults.py's "Ctrl-C
twice" found Starlette's report of the lifespan task that uvicorn's forced stop leaves to be
cancelled)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.fixtures.service import tiny_spec
from tests.stack import ROOT, Stack, free_port, running_stack, wait_healthy


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A migrated data directory and its environment; no worker, so a run stays queued."""
    with running_stack(tmp_path_factory.mktemp("stop"), with_worker=False) as s:
        yield s


@contextmanager
def own_api(stack: Stack, log: Path, workers: int) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A second API on the stack's data, in a process group of its own as a terminal's job
    is, so that a test can signal the group as Ctrl-C does."""
    port = free_port()
    with open(log, "wb") as out:
        api = subprocess.Popen(
            [sys.executable, "-m", "app.server", "--host", "127.0.0.1", "--port", str(port),
             "--workers", str(workers)],
            cwd=ROOT, env=stack.env, stdout=out, stderr=subprocess.STDOUT, process_group=0,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url)
        yield api, url
    finally:
        if api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait()


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_closes_open_streams_cleanly_and_ends_the_api(
    stack: Stack, tmp_path: Path, workers: int
) -> None:
    """A live stream never ends by itself; the stop closes it (the client would resume with
    Last-Event-ID) rather than waiting for it until the process is killed."""
    log = tmp_path / "api.log"
    with own_api(stack, log, workers) as (api, url):
        run_id = httpx.post(f"{url}/api/runs", json=tiny_spec(stack)).json()["id"]
        with httpx.stream("GET", f"{url}/api/runs/{run_id}/events", timeout=60) as events:
            assert events.status_code == 200
            lines = events.iter_lines()
            assert next(lines).startswith("retry:")
            os.killpg(api.pid, signal.SIGINT)
            # a stop that waited for the stream would end only at the 15 s keepalive's
            # write to a closed client, or never: 60 s bounds a hang, not a speed
            assert api.wait(timeout=60) == 0
            rest = list(lines)  # a clean end of the chunked body, or this raises
        assert "event: status" in rest, rest  # the queued run's history came first
        assert "event: end" not in rest, rest  # closed, not ended: the run is still queued
    output = log.read_text(errors="replace")
    assert "Traceback" not in output, output


def test_ctrl_c_twice_ends_the_api_without_a_traceback(stack: Stack, tmp_path: Path) -> None:
    """The second SIGINT lands before the server's 0.1 s loop has begun the stop, so uvicorn
    forces it: before the fix this always logged the lifespan task's CancelledError."""
    log = tmp_path / "api.log"
    with own_api(stack, log, workers=1) as (api, _url):
        os.killpg(api.pid, signal.SIGINT)
        time.sleep(0.02)  # two deliveries, not one pending signal sent twice
        os.killpg(api.pid, signal.SIGINT)
        api.wait(timeout=60)
    output = log.read_text(errors="replace")
    assert "Traceback" not in output, output


def test_the_api_answers_to_the_address_it_was_told_to_bind(stack: Stack, tmp_path: Path) -> None:
    """`python -m app.server --host ADDR` answers requests addressed to ADDR: its Host-header
    guard allowed only GRPO_HOST's address and loopback names, so a server bound with --host
    alone refused its own address (found building issue 42's hosts on a bridge)."""
    port, env = free_port(), {k: v for k, v in stack.env.items() if k != "GRPO_HOST"}
    with open(tmp_path / "api.log", "wb") as out:
        api = subprocess.Popen(
            [sys.executable, "-m", "app.server", "--host", "127.0.0.2", "--port", str(port)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_healthy(f"http://127.0.0.2:{port}")
        assert httpx.get(f"http://127.0.0.2:{port}/api/runs").status_code == 200
    finally:
        api.kill()
        api.wait()
