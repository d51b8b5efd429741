"""Workers in the real world: killed mid-run, cancelled, duplicate deliveries, bad jobs.

Real `celery worker` processes on PostgreSQL + Redis and on the embedded default; the
heartbeat is shortened so a lost worker is noticed in seconds.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.settings import Settings
from tests.integration.conftest import tiny_spec
from tests.integration.test_run_lifecycle import wait_for_final
from tests.stack import REDIS_URL, Stack, create_pg_database, drop_pg_database, running_stack
from worker.celery_app import TRAIN_TASK, make_celery

FAST = {"GRPO_HEARTBEAT_SECONDS": "1", "GRPO_STALE_AFTER_SECONDS": "6"}


@pytest.fixture(scope="module", params=["postgres", "embedded"])
def fast_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp(f"resilient-{request.param}")
    env = {**FAST, "GRPO_MODEL_ROOTS": str(data_dir / "models")}
    if request.param == "embedded":
        with running_stack(data_dir, extra_env=env) as stack:
            yield stack
        return
    url = create_pg_database()
    try:
        with running_stack(
            data_dir, database_url=url, broker_url=REDIS_URL, extra_env=env
        ) as stack:
            yield stack
    finally:
        drop_pg_database(url)


def wait_for_step(client: httpx.Client, run_id: str, step: int, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.get(f"/api/runs/{run_id}").json()
        if run["step"] >= step or run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        time.sleep(0.2)
    raise TimeoutError(f"run {run_id} did not reach step {step}")


def test_killed_worker_run_resumes_on_another_worker_with_every_step_once(
    fast_stack: Stack,
) -> None:
    with fast_stack.client() as client:
        spec = tiny_spec(fast_stack, max_steps=8, save_steps=2, name="killed")
        run_id = client.post("/api/runs", json=spec).json()["id"]
        before = wait_for_step(client, run_id, 3)
        assert before["status"] == "running", before
        first_worker = fast_stack.processes["worker"]
        os.kill(first_worker.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        first_worker.wait()
        fast_stack.start_worker("worker2")

        requeued_at = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            run = client.get(f"/api/runs/{run_id}").json()
            if run["attempts"] >= 2 and run["status"] == "running":
                requeued_at = time.monotonic()
                break
            time.sleep(0.2)
        assert requeued_at, f"run was not picked up again\n{fast_stack.logs()}"
        final = wait_for_final(client, run_id)
        assert final["status"] == "succeeded", f"{final['error']}\n{fast_stack.logs()}"
        assert final["attempts"] == 2

        steps = [m["step"] for m in client.get(f"/api/runs/{run_id}/metrics").json()["items"]]
        assert steps == list(range(1, 9))
        groups = client.get(f"/api/runs/{run_id}/steps/3/groups").json()["items"]
        assert [g["index"] for g in groups] == [0, 1]
        logs = " ".join(
            line["message"] for line in client.get(f"/api/runs/{run_id}/logs").json()["items"]
        )
        assert "requeued" in logs and "resum" in logs.lower()
        # Bounded by GRPO_STALE_AFTER_SECONDS plus one housekeeping period and a worker start.
        print(f"\nkill -> running again on worker2: {requeued_at - killed_at:.1f} s")
        assert requeued_at - killed_at < 6 + 1 + 60


def test_cancel_stops_a_running_run_within_one_step_and_resume_finishes_it(
    fast_stack: Stack,
) -> None:
    with fast_stack.client() as client:
        run_id = client.post(
            "/api/runs", json=tiny_spec(fast_stack, max_steps=12, save_steps=5)
        ).json()["id"]
        at_cancel = wait_for_step(client, run_id, 2)
        assert client.post(f"/api/runs/{run_id}/cancel").json()["is_cancel_requested"]
        cancelled = wait_for_final(client, run_id)
        assert cancelled["status"] == "cancelled"
        assert cancelled["step"] <= at_cancel["step"] + 2  # the step in flight, then the boundary
        resumed = client.post(f"/api/runs/{run_id}/resume").json()
        assert resumed["status"] == "queued"
        final = wait_for_final(client, run_id)
        assert final["status"] == "succeeded", final["error"]
        steps = [m["step"] for m in client.get(f"/api/runs/{run_id}/metrics").json()["items"]]
        assert steps == list(range(1, 13))


def test_duplicate_delivery_of_a_finished_run_changes_nothing(fast_stack: Stack) -> None:
    with fast_stack.client() as client:
        run_id = client.post("/api/runs", json=tiny_spec(fast_stack, max_steps=2)).json()["id"]
        done = wait_for_final(client, run_id)
        events_before = client.get(f"/api/runs/{run_id}/metrics").json()
        settings = Settings(
            data_dir=fast_stack.data_dir, broker_url=fast_stack.env.get("GRPO_BROKER_URL")
        )
        make_celery(settings).send_task(TRAIN_TASK, args=[run_id], queue=fast_stack.queue)
        # A healthy run queued after the duplicate proves the worker got past it.
        after = client.post("/api/runs", json=tiny_spec(fast_stack, max_steps=1)).json()["id"]
        assert wait_for_final(client, after)["status"] == "succeeded"
        assert client.get(f"/api/runs/{run_id}").json() == done
        assert client.get(f"/api/runs/{run_id}/metrics").json() == events_before


def _write_empty_dataset(stack: Stack) -> str:
    path = stack.data_dir / "datasets" / "empty.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return str(path)


def _write_model_without_eos(stack: Stack) -> str:
    """A real local model whose tokenizer has no end-of-sequence token."""
    from grpo.models import load_policy

    model, tokenizer = load_policy(
        "builtin:tiny", cache_dir=Path(stack.data_dir / "cache"), progress=False
    )
    target = stack.data_dir / "models" / "no-eos"
    tokenizer.eos_token = None
    model.config.eos_token_id = None
    model.generation_config.eos_token_id = None
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return str(target)


@pytest.mark.parametrize(
    "case",
    ["missing_model", "empty_dataset", "tokenizer_without_eos"],
)
def test_bad_jobs_fail_with_a_clear_message_and_the_worker_goes_on(
    fast_stack: Stack, case: str
) -> None:
    with fast_stack.client() as client:
        match case:
            case "missing_model":
                overrides, expected = (
                    {"model": str(fast_stack.data_dir / "models" / "nope")},
                    "nope",
                )
            case "empty_dataset":
                overrides, expected = (
                    {"data": {"source": _write_empty_dataset(fast_stack)}},
                    "empty",
                )
            case _:
                overrides, expected = (
                    {"model": _write_model_without_eos(fast_stack)},
                    "no EOS token",
                )
        response = client.post("/api/runs", json=tiny_spec(fast_stack, **overrides))
        assert response.status_code == 201, response.text
        failed = wait_for_final(client, response.json()["id"])
        assert failed["status"] == "failed"
        assert expected in failed["error"], failed["error"]
        healthy = client.post("/api/runs", json=tiny_spec(fast_stack, max_steps=1)).json()["id"]
        assert wait_for_final(client, healthy)["status"] == "succeeded"
