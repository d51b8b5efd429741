"""A real run through every layer: REST -> SQL -> Celery worker -> SQL -> metrics and SSE."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from sqlalchemy import select

from app.store.models import Checkpoint
from tests.fixtures.service import tiny_spec
from tests.sse import read_events
from tests.stack import Stack

FINAL = {"succeeded", "failed", "cancelled"}


def wait_for_final(client: httpx.Client, run_id: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.get(f"/api/runs/{run_id}").json()
        if run["status"] in FINAL:
            return run
        time.sleep(0.5)
    raise TimeoutError(f"run {run_id} still {run['status']} after {timeout}s")


def recorded_checkpoints(stack: Stack, run_id: str) -> list[Checkpoint]:
    """The stack's checkpoint rows, read as the checkpoints endpoint of issue 16 will."""
    return stack.rows(
        select(Checkpoint).where(Checkpoint.run_id == run_id).order_by(Checkpoint.step)
    )


def test_submitted_run_trains_and_stores_every_step_once(stack: Stack) -> None:
    with stack.client() as client:
        response = client.post("/api/runs", json=tiny_spec(stack, max_steps=3))
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        assert response.headers["location"] == f"/api/runs/{run_id}"
        assert response.json()["status"] == "queued"

        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        assert (run["step"], run["total_steps"]) == (3, 3)
        assert run["started_at"] and run["finished_at"] and run["worker"]

        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        assert [m["step"] for m in metrics] == [1, 2, 3]
        for row in metrics:
            for key in (
                "reward",
                "reward_std",
                "kl",
                "loss",
                "completions/mean_length",
                "time/step",
            ):
                assert key in row["metrics"], key
            assert row["metrics"]["time/step"] > 0

        # save_steps 2 of 3: steps 2 and 3 (the final one) are on disk, and recorded
        saved = recorded_checkpoints(stack, run_id)
        assert [(c.step, c.is_final) for c in saved] == [(2, False), (3, True)]
        for c in saved:
            files = [f for f in Path(c.path).rglob("*") if f.is_file()]
            assert c.num_bytes == sum(f.stat().st_size for f in files) > 0


def test_event_stream_replays_from_the_database_and_resumes_without_gaps(stack: Stack) -> None:
    with stack.client() as client:
        run_id = client.post("/api/runs", json=tiny_spec(stack, max_steps=3)).json()["id"]
        everything = read_events(client, f"/api/runs/{run_id}/events")
        assert everything[-1].kind == "end"
        events = everything[:-1]
        ids = [e.id for e in events]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert [e.data["step"] for e in events if e.kind == "step"] == [1, 2, 3]
        statuses = [e.data["status"] for e in events if e.kind == "status"]
        assert statuses[0] == "queued" and statuses[-1] == "succeeded" and "running" in statuses

        # A client that dropped after the third event resumes exactly after it.
        resumed = read_events(client, f"/api/runs/{run_id}/events", last_event_id=ids[2])
        assert [e.id for e in resumed[:-1]] == ids[3:]


def test_metrics_query_filters_keys_and_steps(stack: Stack) -> None:
    with stack.client() as client:
        run_id = client.post("/api/runs", json=tiny_spec(stack, max_steps=3)).json()["id"]
        assert wait_for_final(client, run_id)["status"] == "succeeded"
        full = client.get(f"/api/runs/{run_id}/metrics").json()
        events = read_events(client, f"/api/runs/{run_id}/events")
        assert full["last_event_id"] == events[-2].id  # where the stream continues after it
        rows = client.get(
            f"/api/runs/{run_id}/metrics", params={"after_step": 1, "keys": "reward,kl"}
        ).json()
        assert rows["last_event_id"] == full["last_event_id"]
        assert [r["step"] for r in rows["items"]] == [2, 3]
        assert all(set(r["metrics"]) == {"reward", "kl"} for r in rows["items"])


def test_health_reports_database_and_broker(stack: Stack) -> None:
    body = httpx.get(f"{stack.url}/api/health").json()
    assert body == {**body, "status": "ok", "database": True, "broker": True}


def test_bad_spec_is_rejected_at_submit_naming_the_field(stack: Stack) -> None:
    with stack.client() as client:
        before = [r["id"] for r in client.get("/api/runs").json()["items"]]
        response = client.post("/api/runs", json=tiny_spec(stack, num_generations=1))
        assert response.status_code == 422
        assert response.json()["error"]["fields"][0]["loc"] == "num_generations"
        assert [r["id"] for r in client.get("/api/runs").json()["items"]] == before


def test_stream_dropped_mid_run_resumes_with_no_gap_or_repeat(stack: Stack) -> None:
    with stack.client() as client:
        run_id = client.post("/api/runs", json=tiny_spec(stack, max_steps=4)).json()["id"]
        path = f"/api/runs/{run_id}/events"
        head = read_events(client, path, max_events=3)  # disconnects while the run trains
        tail = read_events(client, path, last_event_id=head[-1].id)
        whole = read_events(client, path)
        assert [e.id for e in head + tail] == [e.id for e in whole]
        assert [e.data["step"] for e in head + tail if e.kind == "step"] == [1, 2, 3, 4]


def test_groups_of_a_step_hold_every_completion_with_reward_and_advantage(stack: Stack) -> None:
    with stack.client() as client:
        run_id = client.post("/api/runs", json=tiny_spec(stack, max_steps=2)).json()["id"]
        assert wait_for_final(client, run_id)["status"] == "succeeded"
        groups = client.get(f"/api/runs/{run_id}/steps/2/groups").json()["items"]
        assert [g["index"] for g in groups] == [0, 1]
        for g in groups:
            assert len(g["rewards"]) == len(g["advantages"]) == 4
            assert abs(sum(g["advantages"])) < 1e-4  # centred within the group
        detail = client.get(f"/api/runs/{run_id}/steps/2/groups/0").json()
        rewards = [c["reward"] for c in detail["completions"]]
        assert len(rewards) == 4 and rewards == sorted(rewards, reverse=True)
        assert sorted(rewards) == sorted(detail["rewards"])
        assert all("accuracy" in c["rewards"] for c in detail["completions"])
        for c in detail["completions"]:  # each token's text, for the per-token KL view
            assert len(c["tokens"]) == len(c["token_kls"]) == c["num_tokens"]
            assert "".join(c["tokens"]) == c["text"]
        spread = client.get(f"/api/runs/{run_id}/histograms").json()["items"]
        assert [sum(row["group_reward_std_histogram"]) for row in spread] == [2, 2]
        history = client.get(f"/api/runs/{run_id}/prompts/{detail['prompt_id']}").json()["items"]
        assert history and all(h["prompt_id"] == detail["prompt_id"] for h in history)
        assert client.get(f"/api/runs/{run_id}/steps/2/groups/99").status_code == 404
        csv_text = client.get(f"/api/runs/{run_id}/export", params={"format": "csv"}).text
        assert csv_text.splitlines()[0].startswith("step,") and len(csv_text.splitlines()) == 3
        lines = client.get(
            f"/api/runs/{run_id}/export", params={"format": "jsonl", "what": "groups"}
        ).text
        assert len(lines.splitlines()) == 4  # 2 steps x 2 groups
