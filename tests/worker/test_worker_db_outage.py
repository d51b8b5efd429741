"""The worker waits out a database outage inside the run: PostgreSQL (a cluster of the
test's own) stopped mid-run for longer than the stale limit but within
GRPO_DB_OUTAGE_WAIT_SECONDS, the run goes on in its first attempt, never failed, every step
stored once, and its log says how long it waited; a run on a worker allowed a shorter wait
is handed back to the queue as a stopping worker's run is, and resumes from its checkpoint.

Both runs train at once through one outage, each on a worker of its own: the test-time
budget is tight, and the second worker's stale-run sweep, right after the outage, must not
take the first run (whose heartbeat the outage stopped) from its worker.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.store import db, lease, runs, steps
from app.store.lease import Lease, LeaseLost
from app.store.models import Event, LogLine, RunStatus, StepMetric, utcnow
from grpo.spec import JobSpec
from tests.fixtures.service import tiny_spec
from tests.own_postgres import own_postgres
from tests.rewards.test_rewards_service import RewardHandler
from tests.sse import read_events
from tests.stack import Stack, running_stack
from tests.store.test_store_lease import report
from tests.store_fixture import session, store
from tests.worker.test_faults import assert_every_step_once
from tests.worker.test_run_lifecycle import FINAL
from tests.worker.test_worker_resilience import FAST
from worker.db_outage import OutageWait

__all__ = ["session", "store"]

OUTAGE_SECONDS = 15.0
"""Longer than the stale limit (FAST: 6 s), well within the default wait (120 s), well past
the wait the second worker allows (3 s)."""
WAITED = re.compile(r"database unreachable for (\d+\.\d) s; waited and went on")


def test_a_run_waits_out_an_outage_in_its_first_attempt_and_past_the_wait_is_handed_back(
    tmp_path: Path,
) -> None:
    judge = ThreadingHTTPServer(("127.0.0.1", 0), GatedJudge)
    threading.Thread(target=judge.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{judge.server_address[1]}"
    try:
        with (
            own_postgres() as postgres,
            running_stack(
                tmp_path / "stack",
                database_url=postgres.url,
                extra_env={**FAST, "GRPO_REWARD_HOSTS": host},
                with_worker=False,
            ) as stack,
            stack.client() as client,
        ):
            start_worker(stack, "waits")
            start_worker(stack, "gives-up", GRPO_DB_OUTAGE_WAIT_SECONDS="3")
            run_ids = {
                "waits": submit(client, stack, host, "waits", save_steps=0),
                "gives-up": submit(client, stack, host, "gives-up", save_steps=2),
            }
            hold_mid_run(
                client, run_ids
            )  # each in a step after 3 (the checkpoint at 2 is in place)
            postgres.stop()
            try:
                GatedJudge.release()  # each finishes its step and meets the outage writing it
                time.sleep(OUTAGE_SECONDS)
            finally:
                postgres.start()
            assert_waited_it_out(client, stack, run_ids["waits"])
            assert_handed_back_and_resumed(client, stack, run_ids["gives-up"])
    finally:
        GatedJudge.release()
        judge.shutdown()


class GatedJudge(RewardHandler):
    """A reward endpoint (a path per run) that answers at once until the test closes the
    run's gate, then holds its requests until the test releases them all."""

    closed: ClassVar[set[str]] = set()
    held: ClassVar[set[str]] = set()
    opened = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        name = self.path.strip("/")
        if name in GatedJudge.closed:
            GatedJudge.held.add(name)
            GatedJudge.opened.wait(timeout=120)
        self._answer(200, {"rewards": [[0.5] * len(g["completions"]) for g in body["groups"]]})

    @classmethod
    def release(cls) -> None:
        cls.opened.set()


def hold_mid_run(client: httpx.Client, run_ids: dict[str, str]) -> None:
    """Close each run's gate once it has stored step 3, and wait until both are held."""
    deadline = time.monotonic() + 180
    while GatedJudge.held != set(run_ids) and time.monotonic() < deadline:
        for name, run_id in run_ids.items():
            if name not in GatedJudge.closed and step_of(client, run_id) >= 3:
                GatedJudge.closed.add(name)
        time.sleep(0.1)
    assert GatedJudge.held == set(run_ids), [step_of(client, r) for r in run_ids.values()]


def step_of(client: httpx.Client, run_id: str) -> int:
    return int(client.get(f"/api/runs/{run_id}").json()["step"])


def assert_waited_it_out(client: httpx.Client, stack: Stack, run_id: str) -> None:
    seen = follow_to_final(client, run_id)
    final = seen[-1]
    assert final["status"] == "succeeded", f"{final['error']}\n{stack.logs()}"
    assert final["attempts"] == 1
    assert {run["status"] for run in seen} <= {"running", "succeeded"}
    assert status_history(client, run_id) == ["queued", "running", "succeeded"]
    assert_every_step_once(client, final)
    lines = [m for m in log_messages(client, run_id) if WAITED.fullmatch(m)]
    assert len(lines) == 1, log_messages(client, run_id)
    waited = float(WAITED.fullmatch(lines[0]).group(1))  # type: ignore[union-attr]
    assert OUTAGE_SECONDS - 5 < waited < OUTAGE_SECONDS + 10, lines


def assert_handed_back_and_resumed(client: httpx.Client, stack: Stack, run_id: str) -> None:
    final = follow_to_final(client, run_id)[-1]
    assert final["status"] == "succeeded", f"{final['error']}\n{stack.logs()}"
    assert final["attempts"] == 2  # a hand-back's next claim, as after a stop
    history = status_history(client, run_id)
    assert history == ["queued", "running", "queued", "running", "succeeded"], history
    assert_every_step_once(client, final)
    messages = log_messages(client, run_id)
    back = [m for m in messages if "gave the run back" in m]
    assert len(back) == 1 and "GRPO_DB_OUTAGE_WAIT_SECONDS" in back[0], messages
    assert any(m.startswith("resumed from checkpoint at step ") for m in messages), messages


def start_worker(stack: Stack, queue: str, **env: str) -> subprocess.Popen[bytes]:
    """A worker named after the queue it alone consumes, with `env` on top of the stack's."""
    plain = stack.env
    stack.env = {**plain, **env}
    try:
        return stack.start_worker(queue, queue=queue)
    finally:
        stack.env = plain


def submit(client: httpx.Client, stack: Stack, host: str, queue: str, *, save_steps: int) -> str:
    """A run of 6 steps on `queue`, its reward from the judge's path of that name."""
    reward = {"name": "http", "url": f"http://{host}/{queue}", "timeout_s": 120}
    spec = tiny_spec(stack, name=queue, max_steps=6, save_steps=save_steps, rewards=[reward])
    spec["resources"] = {"queue": queue}
    answer = client.post("/api/runs", json=spec)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def follow_to_final(client: httpx.Client, run_id: str, timeout: float = 240) -> list[Any]:
    """The run as polled until it ends, every answer (the API answers 503 while the
    database is away; those are skipped)."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = client.get(f"/api/runs/{run_id}")
        if answer.status_code == 200:
            seen.append(answer.json())
            if seen[-1]["status"] in FINAL:
                return seen
        time.sleep(0.3)
    raise TimeoutError(f"run {run_id} did not end in {timeout} s: {seen[-1:]}")


def status_history(client: httpx.Client, run_id: str) -> list[str]:
    events = read_events(client, f"/api/runs/{run_id}/events", timeout=60)
    return [e.data["status"] for e in events if e.kind == "status"]


def log_messages(client: httpx.Client, run_id: str) -> list[str]:
    return [line["message"] for line in client.get(f"/api/runs/{run_id}/logs").json()["items"]]


@pytest.mark.parametrize("store", ["postgres"], indirect=True)  # a commit over a network
def test_a_retried_write_whose_commit_landed_is_stored_once(session: Session) -> None:
    """A commit can land while its answer is lost with the connection: the worker's retry
    (worker/db_outage.py) finds the step, the log line and the final status done."""
    run, _ = runs.create_run(session, JobSpec(model="builtin:tiny"), package_version="t")
    held = Lease.of(runs.claim_run(session, run.id, worker="w", device="cpu"))  # type: ignore[arg-type]
    waits = OutageWait(limit_s=10)
    at = utcnow()
    waits.call(answer_lost(steps.save_step), run.id, report(1), lease=held)
    waits.call(answer_lost(lease.add_log), held, "info", "note", at=at)
    with pytest.raises(LeaseLost):  # the retry finds the run ended: worker/job.py then asks
        waits.call(answer_lost(lease.finish), held, status=RunStatus.SUCCEEDED)
    assert db.call(lease.is_left_as, held, RunStatus.SUCCEEDED)
    count = select(func.count())
    assert session.scalar(count.where(StepMetric.run_id == run.id)) == 1
    assert session.scalar(count.where(Event.run_id == run.id, Event.kind == "step")) == 1
    assert session.scalar(count.where(LogLine.run_id == run.id, LogLine.message == "note")) == 1
    statuses = session.scalars(select(Event.payload).where(Event.kind == "status")).all()
    assert [e["status"] for e in statuses] == ["queued", "running", "succeeded"]


def answer_lost(fn: Any) -> Any:
    """`fn` whose first call commits and then loses its answer, as a connection that breaks
    right after the server committed; later calls are `fn` itself."""
    calls = [0]

    def call(opened: Session, /, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] > 1:
            return fn(opened, *args, **kwargs)
        fn(opened, *args, **kwargs)
        lost = OperationalError("COMMIT", {}, Exception("server closed the connection"))
        raise lost

    return call
