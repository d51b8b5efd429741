"""POST /api/rewards/test: the real app in this process, the real scoring process it
starts (grpo/rewards/trial_process.py, the worker's Rewarder), a plugin file of this test's
own for the functions that fail, and an endpoint that is not there. Each failure comes
back with its kind; bad requests are 422s naming the field."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import reward_trials
from app.main import create_app
from app.settings import get_settings
from tests.store_fixture import store

__all__ = ["store"]

PLUGIN = """
import time


def crashes(completions, **kwargs):
    return [1.0 / len(c.strip()) for c in completions]


def says_yes(completions, **kwargs):
    return ["yes" for _ in completions]


def sleeps(completions, **kwargs):
    time.sleep(30)
    return [0.0 for _ in completions]


def hogs(completions, **kwargs):
    block = bytearray(64 * 1024**3)
    return [float(len(block)) for _ in completions]


def with_column(completions, difficulty, **kwargs):
    return [float(d) for d in difficulty]
"""
ARITH = {"prompt": "What is 2+2?", "answer": "4", "difficulty": 3}


@pytest.fixture
def api(store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "trial_rewards.py").write_text(PLUGIN)
    monkeypatch.setenv("GRPO_PLUGIN_DIRS", str(plugins))
    monkeypatch.setenv("GRPO_REWARD_HOSTS", f"127.0.0.1:{closed_port()}")
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def python(function: str) -> dict[str, Any]:
    return {"name": "python", "function": function}


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_each_function_scores_each_sample_and_each_failure_has_its_kind(api: TestClient) -> None:
    host = get_settings().reward_host_list[0]
    rewards = [
        {"name": "accuracy"},
        {"name": "format"},
        python("with_column"),
        python("crashes"),
        python("says_yes"),
        python("sleeps"),
        python("hogs"),
        {"name": "http", "url": f"http://{host}/score", "max_retries": 0},
    ]
    solved = "<think>2 and 2</think>\n<answer>4</answer>"
    samples = [
        {**ARITH, "completion": solved},
        {**ARITH, "completion": "  "},
    ]
    response = api.post(
        "/api/rewards/test", json={"rewards": rewards, "samples": samples, "timeout_s": 1}
    )
    assert response.status_code == 200, response.text
    right, blank = response.json()["results"]
    assert right["scores"] == {
        "accuracy": 1.0, "format": 1.0, "with_column": 3.0, "crashes": 1 / len(solved),
        "says_yes": None, "sleeps": None, "hogs": None, "http": None,
    }  # fmt: skip
    assert blank["scores"]["accuracy"] == 0.0 and blank["scores"]["crashes"] is None
    kinds = {f["label"]: f["kind"] for f in right["failures"]}
    assert kinds == {
        "says_yes": "bad_return_value", "sleeps": "timeout", "hogs": "out_of_memory",
        "http": "unreachable",
    }  # fmt: skip
    assert {f["label"]: f["kind"] for f in blank["failures"]}["crashes"] == "runtime_error"
    message = {f["label"]: f["message"] for f in blank["failures"]}["crashes"]
    assert message == "ZeroDivisionError: float division by zero"
    assert set(right["seconds"]) == {"accuracy", "format", "with_column", "crashes"}


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_what_submit_refuses_and_malformed_samples_are_422s_naming_the_field(
    api: TestClient,
) -> None:
    body = {
        "rewards": [
            {"name": "http", "url": "http://judge.example:8000/score"},
            python("nowhere"),
            {"name": "accuracy"},
        ],
        "samples": [{"prompt": "2+2?", "answer": "4"}, {"completion": "4", "answer": "4"}],
    }
    response = api.post("/api/rewards/test", json=body)
    assert response.status_code == 422, response.text
    locs = {f["loc"] for f in response.json()["error"]["fields"]}
    assert locs == {"rewards.0.url", "rewards.1.function", "samples.0.completion", "samples.1"}
    too_many = {
        "rewards": [{"name": "format"}],
        "samples": [{"prompt": "p", "completion": ""}] * 33,
    }
    response = api.post("/api/rewards/test", json=too_many)
    assert response.status_code == 422 and "samples" in response.text
    no_answer = {"rewards": [{"name": "accuracy"}], "samples": [{"prompt": "p", "completion": ""}],
                 "answer_field": None}  # fmt: skip
    response = api.post("/api/rewards/test", json=no_answer)
    assert [f["loc"] for f in response.json()["error"]["fields"]] == ["rewards.0"]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_test_past_its_deadline_answers_what_it_reached_and_timeouts_for_the_rest(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reward_trials, "TOTAL_SECONDS", 4.0)
    samples = [{**ARITH, "completion": "<answer>4</answer>"}] * 2
    body = {"rewards": [{"name": "accuracy"}, python("sleeps")], "samples": samples}
    response = api.post("/api/rewards/test", json={**body, "timeout_s": 60})
    assert response.status_code == 200, response.text
    for result in response.json()["results"]:
        assert result["scores"] == {"accuracy": None, "sleeps": None}
        assert {f["kind"] for f in result["failures"]} == {"timeout"}
        assert "ran past its limit of 4 s" in result["failures"][0]["message"]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_code_rewards_run_in_the_workers_sandbox_with_its_notes(api: TestClient) -> None:
    tests = [{"call": "add(1, 2)", "expected": 3}, "assert add(2, 2) == 4"]
    samples = [
        {
            "prompt": "Write add.",
            "tests": tests,
            "completion": "def add(a, b):\n    return a + b\n",
        },
        {
            "prompt": "Write add.",
            "tests": tests,
            "completion": "def add(a, b):\n    while True: pass\n",
        },
        {"prompt": "Write add.", "tests": tests, "completion": "open('/etc/hostname').read()\n"},
    ]
    code = {"name": "code", "timeout_s": 1, "memory_mb": 256}
    body = {"rewards": [code], "samples": samples, "answer_field": None}
    response = api.post("/api/rewards/test", json=body)
    assert response.status_code == 200, response.text
    solved, loops, escapes = response.json()["results"]
    assert solved["scores"] == {"code": 1.0} and solved["failures"] == []
    assert (
        loops["scores"] == {"code": 0.0}
        and loops["notes"]["code"] == "killed at the CPU limit (1 s)"
    )
    assert escapes["scores"] == {"code": 0.0}  # no host file in the sandbox
    assert escapes["notes"]["code"] == "the program raised FileNotFoundError"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_past_the_tests_running_at_once_a_caller_is_told_to_retry(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reward_trials, "_running", threading.BoundedSemaphore(1))
    reward_trials._running.acquire()  # the one place is taken
    sample = {"prompt": "p", "answer": "a", "completion": ""}
    body = {"rewards": [{"name": "format"}], "samples": [sample]}
    response = api.post("/api/rewards/test", json=body)
    assert response.status_code == 429 and response.json()["error"]["code"] == "busy"
