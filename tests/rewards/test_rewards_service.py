"""Programmable rewards through the service: a reward endpoint started here on 127.0.0.1,
the example plugin, submit-time refusals, and the code task in the sandbox."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.fixtures.service import tiny_spec
from tests.rewards.test_reward_model import build_classifier
from tests.stack import Stack, running_stack
from tests.worker.test_run_lifecycle import wait_for_final


def judge(text: str) -> float:
    """The endpoint's score of one completion: a function of the text only."""
    return (len(text) % 5) / 4


class RewardHandler(BaseHTTPRequestHandler):
    """/score answers judge(text) for every completion; the other paths misbehave."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        groups = body["groups"]
        if self.path == "/fail":
            self._answer(500, {"detail": "judge is down"})
        elif self.path == "/slow":
            time.sleep(3)
            self._answer(200, {"rewards": [[0.0] * len(g["completions"]) for g in groups]})
        elif self.path == "/shape":
            self._answer(200, {"rewards": [[1.0]]})
        else:
            self._answer(200, {"rewards": [[judge(t) for t in g["completions"]] for g in groups]})

    def _answer(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def reward_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), RewardHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GRPO_MODEL_ROOTS of the stack, holding a small classifier built here (no download)."""
    root = tmp_path_factory.mktemp("models")
    build_classifier(root / "rm")
    return root


@pytest.fixture(scope="module")
def reward_stack(
    tmp_path_factory: pytest.TempPathFactory, reward_server: str, models_dir: Path
) -> Iterator[Stack]:
    hosts = reward_server.removeprefix("http://")
    env = {"GRPO_REWARD_HOSTS": hosts, "GRPO_MODEL_ROOTS": str(models_dir)}
    with running_stack(tmp_path_factory.mktemp("rewards"), extra_env=env) as stack:
        yield stack


def _http_spec(stack: Stack, url: str, **entry: object) -> dict[str, object]:
    reward = {"name": "http", "url": url, "label": "judge", **entry}
    return tiny_spec(stack, max_steps=2, rewards=[reward], logging={"max_groups_per_step": 8})


def test_every_stored_endpoint_reward_is_the_servers_answer(
    reward_stack: Stack, reward_server: str
) -> None:
    with reward_stack.client() as client:
        spec = _http_spec(reward_stack, f"{reward_server}/score", groups_per_request=1)
        run_id = client.post("/api/runs", json=spec).json()["id"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{reward_stack.logs()}"
        for step in (1, 2):
            for index in (0, 1):
                detail = client.get(f"/api/runs/{run_id}/steps/{step}/groups/{index}").json()
                for c in detail["completions"]:
                    assert c["rewards"] == {"judge": judge(c["text"])}
                    assert c["reward"] == pytest.approx(judge(c["text"]))
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        assert all("time/reward/judge" in row["metrics"] for row in metrics)


@pytest.mark.parametrize(
    ("path", "entry", "says"),
    [
        ("/fail", {"max_retries": 1}, "HTTP 500"),
        ("/slow", {"timeout_s": 0.5, "max_retries": 0}, "no answer within timeout_s=0.5"),
        ("/shape", {}, "`rewards` has 1 rows for 2 groups"),
    ],
)
def test_endpoint_failures_fail_the_step_naming_label_url_and_status(
    reward_stack: Stack, reward_server: str, path: str, entry: dict[str, object], says: str
) -> None:
    with reward_stack.client() as client:
        spec = _http_spec(reward_stack, f"{reward_server}{path}", **entry)
        # no preflight: it would wait out the same failures for 30 s before step 1 does
        spec["reward_preflight_records"] = 0
        run_id = client.post("/api/runs", json=spec).json()["id"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "failed"
        error = run["error"]
        assert "'judge'" in error and f"{reward_server}{path}" in error and says in error, error
        assert "at step 1" in error


def test_endpoint_outside_the_allowed_hosts_is_a_422_naming_the_field(reward_stack: Stack) -> None:
    with reward_stack.client() as client:
        response = client.post(
            "/api/runs", json=_http_spec(reward_stack, "http://169.254.169.254/latest")
        )
        assert response.status_code == 422
        assert response.json()["error"]["fields"][0]["loc"] == "rewards.0.url"


def test_unknown_entry_point_is_a_422(reward_stack: Stack) -> None:
    with reward_stack.client() as client:
        spec = tiny_spec(reward_stack, rewards=[{"name": "python", "function": "os.system"}])
        response = client.post("/api/runs", json=spec)
        assert response.status_code == 422
        field = response.json()["error"]["fields"][0]
        assert field["loc"] == "rewards.0.function" and "grpo.rewards" in field["message"]


def test_the_example_plugin_trains_a_run(reward_stack: Stack) -> None:
    rewards = [
        {"name": "python", "function": "contains_answer"},
        {"name": "python", "function": "polite", "label": "polite", "weight": 0.1},
    ]
    with reward_stack.client() as client:
        spec = tiny_spec(reward_stack, max_steps=2, rewards=rewards)
        run_id = client.post("/api/runs", json=spec).json()["id"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{reward_stack.logs()}"
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        # a python reward is labelled by its function unless given a label
        keys = set(metrics[-1]["metrics"])
        assert {"rewards/contains_answer/mean", "rewards/polite/mean"} <= keys


def test_the_code_task_runs_through_the_service(reward_stack: Stack) -> None:
    spec = tiny_spec(
        reward_stack,
        max_steps=2,
        data={"source": "builtin:code"},
        rewards=[{"name": "code", "timeout_s": 2, "memory_mb": 256}],
        max_completion_length=12,
    )
    with reward_stack.client() as client:
        run_id = client.post("/api/runs", json=spec).json()["id"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{reward_stack.logs()}"
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        assert [m["step"] for m in metrics] == [1, 2]
        assert all(0 <= m["metrics"]["rewards/code/mean"] <= 1 for m in metrics)
        details = [client.get(f"/api/runs/{run_id}/steps/1/groups/{b}").json() for b in (0, 1)]
        completions = [c for d in details for c in d["completions"]]
        assert all("code" in c["rewards"] for c in completions)
        # the random model's programs mostly do not parse: their notes say so, score 0
        noted = [c for c in completions if c["note"]]
        assert noted and all(c["note"].startswith("code: ") for c in noted)
        assert all(c["rewards"]["code"] == 0.0 for c in noted)


def test_the_worker_checks_endpoint_hosts_again(
    tmp_path_factory: pytest.TempPathFactory, reward_server: str
) -> None:
    # the API allows the host, this worker's own GRPO_REWARD_HOSTS does not
    hosts = reward_server.removeprefix("http://")
    with running_stack(
        tmp_path_factory.mktemp("strict-worker"),
        extra_env={"GRPO_REWARD_HOSTS": hosts},
        with_worker=False,
    ) as stack:
        stack.env = {**stack.env, "GRPO_REWARD_HOSTS": "judge.internal"}
        stack.start_worker()
        with stack.client() as client:
            response = client.post("/api/runs", json=_http_spec(stack, f"{reward_server}/score"))
            assert response.status_code == 201, response.text
            run = wait_for_final(client, response.json()["id"])
    assert run["status"] == "failed"
    assert "not in this worker's GRPO_REWARD_HOSTS" in run["error"] and hosts in run["error"]


def test_stored_reward_model_scores_are_the_classifiers(
    reward_stack: Stack, models_dir: Path
) -> None:
    from grpo.rewards.classifier import RewardModel
    from grpo.spec import ModelReward

    entry = {"name": "model", "model": str(models_dir / "rm"), "label": "rm", "batch_size": 3}
    spec = tiny_spec(reward_stack, max_steps=1, rewards=[entry], logging={"max_groups_per_step": 8})
    with reward_stack.client() as client:
        run_id = client.post("/api/runs", json=spec).json()["id"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{reward_stack.logs()}"
        details = [client.get(f"/api/runs/{run_id}/steps/1/groups/{b}").json() for b in (0, 1)]
    classifier = RewardModel(
        ModelReward.model_validate(entry), device="cpu", cache_dir=models_dir, roots=None
    )
    for detail in details:
        for c in detail["completions"]:
            expected = classifier.score_texts([classifier.text(detail["prompt"], c["text"])])[0]
            assert c["rewards"]["rm"] == pytest.approx(expected, abs=1e-4)


def test_records_without_answers_train_with_an_endpoint_and_accuracy_is_refused(
    reward_stack: Stack, reward_server: str
) -> None:
    records = "".join(json.dumps({"prompt": f"{i}+1=", "topic": "sums"}) + "\n" for i in range(4))
    with reward_stack.client() as client:
        uploaded = client.post(
            "/api/datasets",
            params={"name": "no-answers", "answer_field": ""},
            content=records.encode(),
            headers={"content-type": "application/x-ndjson"},
        )
        assert uploaded.status_code == 201, uploaded.text
        assert uploaded.json()["fields"] == ["prompt", "topic"]
        data = {"source": uploaded.json()["source"], "answer_field": None}
        judged = [{"name": "http", "url": f"{reward_server}/score"}]
        spec = tiny_spec(reward_stack, max_steps=1, save_steps=0, data=data, rewards=judged)
        refused = client.post("/api/runs", json={**spec, "rewards": [{"name": "accuracy"}]})
        assert refused.status_code == 422
        field = refused.json()["error"]["fields"][0]
        assert field["loc"] == "rewards.0" and "data.answer_field is null" in field["message"]
        run_id = client.post("/api/runs", json=spec).json()["id"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{reward_stack.logs()}"
        detail = client.get(f"/api/runs/{run_id}/steps/1/groups/0").json()
        assert detail["answer"] == ""
        assert [c["rewards"]["http"] for c in detail["completions"]] == [
            judge(c["text"]) for c in detail["completions"]
        ]
