"""The run API on both stores: list, filters, pagination, idempotency, actions, validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import httpx

from tests.fixtures.service import tiny_spec
from tests.sse import read_events
from tests.stack import ROOT, Stack

JSONL = {"content-type": "application/x-ndjson"}
PARKED = {"resources": {"queue": "parked-no-worker"}}  # no worker listens: runs stay queued


def parked_spec(stack: Stack, **overrides: object) -> dict[str, object]:
    return tiny_spec(stack, **{**PARKED, **overrides})


def test_idempotency_key_makes_a_retried_submit_return_the_same_run(stack: Stack) -> None:
    key = uuid.uuid4().hex
    with stack.client() as client:
        first = client.post("/api/runs", json=parked_spec(stack), headers={"Idempotency-Key": key})
        again = client.post("/api/runs", json=parked_spec(stack), headers={"Idempotency-Key": key})
        assert (first.status_code, again.status_code) == (201, 200)
        assert first.json()["id"] == again.json()["id"]
        named = client.get("/api/runs", params={"q": "tiny", "limit": 500}).json()["items"]
        assert sum(r["id"] == first.json()["id"] for r in named) == 1


def test_submit_stores_the_fully_resolved_spec_and_version(stack: Stack) -> None:
    with stack.client() as client:
        run = client.post("/api/runs", json=parked_spec(stack)).json()
        assert run["spec"]["beta"] == 0.04 and run["spec"]["loss_type"] == "grpo"
        assert run["spec"]["rewards"][0]["name"] == "accuracy"
        assert run["package_version"] and run["total_steps"] == 3


def test_list_pages_with_a_cursor_newest_first_and_filters(stack: Stack) -> None:
    tag = uuid.uuid4().hex[:8]
    with stack.client() as client:
        ids = [
            client.post("/api/runs", json=parked_spec(stack, name=f"page-{tag}-{i}")).json()["id"]
            for i in range(5)
        ]
        seen, cursor = [], None
        while True:
            params = {"q": f"page-{tag}", "limit": 2, **({"cursor": cursor} if cursor else {})}
            page = client.get("/api/runs", params=params).json()
            seen += [r["id"] for r in page["items"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert seen == ids[::-1]
        client.post(f"/api/runs/{ids[0]}/cancel")
        cancelled = client.get(
            "/api/runs", params={"q": f"page-{tag}", "status": "cancelled"}
        ).json()
        assert [r["id"] for r in cancelled["items"]] == [ids[0]]
        assert client.get("/api/runs", params={"cursor": "garbage"}).status_code == 400


def test_cancel_resume_clone_and_delete_a_queued_run(stack: Stack) -> None:
    with stack.client() as client:
        run_id = client.post("/api/runs", json=parked_spec(stack)).json()["id"]
        assert client.delete(f"/api/runs/{run_id}").status_code == 409
        assert client.post(f"/api/runs/{run_id}/resume").status_code == 409
        cancelled = client.post(f"/api/runs/{run_id}/cancel").json()
        assert cancelled["status"] == "cancelled" and cancelled["started_at"] is None

        resumed = client.post(f"/api/runs/{run_id}/resume").json()
        assert resumed["status"] == "queued" and resumed["id"] == run_id
        client.post(f"/api/runs/{run_id}/cancel")

        clone = client.post(f"/api/runs/{run_id}/clone", json={"patch": {"beta": 0.1}})
        assert clone.status_code == 201
        assert clone.json()["id"] != run_id and clone.json()["spec"]["beta"] == 0.1
        bad = client.post(f"/api/runs/{run_id}/clone", json={"patch": {"beta": -1}})
        assert bad.status_code == 422 and bad.json()["error"]["fields"][0]["loc"] == "beta"

        assert client.delete(f"/api/runs/{run_id}").status_code == 204
        assert client.get(f"/api/runs/{run_id}").status_code == 404
        assert client.get(f"/api/runs/{clone.json()['id']}").status_code == 200


def test_step_histograms_are_served_with_their_bins_streamed_and_exported(stack: Stack) -> None:
    with stack.client() as client:
        run_id = client.post("/api/runs", json=parked_spec(stack)).json()["id"]
        seed = [sys.executable, "-m", "tests.seed", "into", run_id, "3"]
        subprocess.run(seed, cwd=ROOT, env=stack.env, check=True)  # 3 steps of 8 groups

        body = client.get(f"/api/runs/{run_id}/histograms").json()
        edges = body["bin_edges"]["group_reward_std_histogram"]
        assert edges[:3] == [0.0, 0.05, 0.1] and edges[-1] == 1.5 and len(edges) == 31
        assert [row["step"] for row in body["items"]] == [1, 2, 3]
        for row in body["items"]:
            assert sum(row["group_reward_std_histogram"]) == 8  # every group of the step
            assert len(row["group_reward_std_histogram"]) == 30
            assert len(row["reward_histogram"]) == len(body["bin_edges"]["reward_histogram"]) - 1
        later = client.get(f"/api/runs/{run_id}/histograms", params={"after_step": 2}).json()
        assert later["items"] == body["items"][2:]

        events = read_events(client, f"/api/runs/{run_id}/events", max_events=4)
        streamed = [e.data for e in events if e.kind == "step"]
        assert [{k: e[k] for k in body["items"][0]} for e in streamed] == body["items"]

        export = client.get(f"/api/runs/{run_id}/export", params={"format": "jsonl"}).text
        lines = [json.loads(line) for line in export.splitlines()]
        assert [{k: line[k] for k in body["items"][0]} for line in lines] == body["items"]
        assert all("reward" in line["metrics"] for line in lines)


def test_groups_filter_by_outcome_or_kind_and_name_a_bad_filter(stack: Stack) -> None:
    with stack.client() as client:
        run_id = client.post("/api/runs", json=parked_spec(stack)).json()["id"]
        # claimed and written as a worker would: one step of 8 groups through save_step
        seed = [sys.executable, "-m", "tests.seed", "live", run_id, "1", "0"]
        subprocess.run(seed, cwd=ROOT, env=stack.env, input="go\nend\n", text=True, check=True)
        url = f"/api/runs/{run_id}/steps/1/groups"
        groups = client.get(url).json()["items"]
        assert len(groups) == 8
        for outcome in ("all_fail", "all_pass", "mixed"):
            kept = client.get(url, params={"filter": outcome}).json()["items"]
            expected = [g["index"] for g in groups if g["outcome"] == outcome]
            assert [g["index"] for g in kept] == expected
        flat = client.get(url, params={"filter": "zero_std"}).json()["items"]
        assert [g["index"] for g in flat] == [g["index"] for g in groups if g["reward_std"] == 0]

        bad = client.get(url, params={"filter": "all_good"})
        assert bad.status_code == 422, bad.text
        assert [f["loc"] for f in bad.json()["error"]["fields"]] == ["query.filter"]


def test_validation_errors_name_the_field_path_and_reason(stack: Stack) -> None:
    cases = [
        ({"bogus": 1}, "bogus"),
        ({"num_generations": 1}, "num_generations"),
        ({"loss_type": "ppo"}, "loss_type"),
        ({"rewards": [{"name": "telepathy"}]}, "rewards.0"),
        ({"rewards": [{"name": "accuracy", "weight": "heavy"}]}, "rewards.0.accuracy.weight"),
        ({"epsilon": 0.3, "epsilon_high": 0.2}, "epsilon_high"),
        ({"model": "/etc"}, "model"),
        ({"prompts_per_step": 2, "resources": {"num_processes": 3}}, "resources"),
        ({"resources": {"sharding": "fsdp"}, "lora": {}}, "resources"),
        ({"data": {"source": "dataset:doesnotexist"}}, "data.source"),
        ({"data": {"source": "../../etc/passwd.jsonl"}}, "data.source"),
    ]
    with stack.client() as client:
        for overrides, loc in cases:
            response = client.post("/api/runs", json=parked_spec(stack, **overrides))
            assert response.status_code == 422, overrides
            error = response.json()["error"]
            assert error["code"] == "validation_error"
            assert error["fields"][0]["loc"].startswith(loc), (overrides, error)
        nan = client.post(
            "/api/runs", content=b'{"beta": NaN}', headers={"content-type": "application/json"}
        )
        assert nan.status_code == 422 and nan.json()["error"]["fields"][0]["loc"] == "beta"
        huge = client.post(
            "/api/runs",
            content=b"{" + b" " * 2_000_000 + b"}",
            headers={"content-type": "application/json"},
        )
        assert huge.status_code == 413
        assert client.get("/api/runs/nope").json() == {
            "error": {"code": "not_found", "message": "run nope not found"}
        }


def test_uploaded_dataset_is_validated_and_usable_by_name(stack: Stack) -> None:
    chat = {
        "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1="}]
    }
    good = (
        b'{"prompt": "2+2=", "answer": "4"}\n{"prompt": "3+3=", "answer": 6}\n'
        + json.dumps({**chat, "answer": "2", "level": 1}).encode()
    )
    with stack.client() as client:
        created = client.post(
            "/api/datasets", params={"name": "tiny-set"}, content=good, headers=JSONL
        )
        assert created.status_code == 201, created.text
        dataset = created.json()
        assert dataset["num_records"] == 3 and dataset["fields"] == ["answer", "level", "prompt"]
        assert any(d["id"] == dataset["id"] for d in client.get("/api/datasets").json()["items"])
        run = client.post("/api/runs", json=parked_spec(stack, data={"source": dataset["source"]}))
        assert run.status_code == 201

        for body, reason in [
            (b"", "empty"),
            (b"\xff\xfe", "UTF-8"),
            (b'{"prompt": "x"}\n', "answer"),
            (b"[1, 2]\n", "object"),
            (b"not json\n", "line 1: invalid JSON"),
            (
                b'{"prompt": 7, "answer": "1"}\n',
                "line 1: field 'prompt' must be a string or a list",
            ),
            (
                b'{"prompt": "a", "answer": "b"}\n\n'
                b'{"prompt": [{"role": "user"}], "answer": "1"}\n',
                "line 3: prompt[0]: a message is",
            ),
        ]:
            response = client.post(
                "/api/datasets", params={"name": "bad"}, content=body, headers=JSONL
            )
            assert response.status_code == 422 and reason in response.json()["error"]["message"]
        bad_field = client.post(
            "/api/datasets",
            params={"name": "x", "prompt_field": "../p"},
            content=good,
            headers=JSONL,
        )
        assert bad_field.status_code == 422


def test_workers_endpoint_lists_the_live_worker_and_its_device(stack: Stack) -> None:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        items = httpx.get(f"{stack.url}/api/workers").json()["items"]
        if items:
            break
        time.sleep(0.5)
    assert items and items[0]["device"].startswith(("cpu", "cuda"))
    assert stack.queue in items[0]["queues"]
    # the stack's OMP_NUM_THREADS=1 is kept (grpo/parallel/threads.py), the wait made passive
    assert (items[0]["threads"], items[0]["omp_wait_policy"]) == (1, "PASSIVE")
    if items[0]["device_kind"] == "cpu":  # no --devices: one CPU slot per CPU it may run on
        assert items[0]["devices"] == [str(i) for i in range(len(os.sched_getaffinity(0)))]
    else:
        assert items[0]["device_kind"] == "cuda" and items[0]["devices"]
