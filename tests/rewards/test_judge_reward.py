"""`judge` rewards (grpo/rewards/judge.py) against an OpenAI-compatible chat-completions
server of this test's own on 127.0.0.1, scored through the Rewarder a worker uses: exact
scores from a number or a label, the rubric filled in, the raw answer kept beside the
score, concurrency bounded, and the failure kinds: an unparsable answer, a timeout, a host
not allowed (at submit and on the worker); and a tiny run trained by the worker's job with
a judge, whose stored completions keep each raw answer beside its score."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter, ValidationError

from app.main import create_app
from app.settings import get_settings
from app.store import db, rescores
from grpo.data.example import Example
from grpo.failures import RewardFunctionError
from grpo.rewards.batch import RewardBatch
from grpo.rewards.failure_kinds import failure_kind
from grpo.rewards.judge import parse_score
from grpo.rewards.kind import ServerFacts
from grpo.rewards.registry import kind_of
from grpo.rewards.scoring import Rewarder
from grpo.spec.rewards import JudgeReward, RewardSpec
from tests.local_http import serving
from tests.store_fixture import store
from worker.job import run_job

__all__ = ["store"]

RUBRIC = "Question: {prompt}\nReference: {answer} ({topic})\nAnswer: {completion}\nScore it."


class ChatServer(BaseHTTPRequestHandler):
    """/score answers `Score: 8/10` to a completion ending in "4", else `2`; /labels answers
    `correct` or `incorrect`; /garbage `I would rather not say.`; /slow sleeps 30 s. Keeps
    each request and the most requests it had in flight at once."""

    requests: list[dict[str, Any]] = []
    in_flight = 0
    most_in_flight = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with ChatServer.lock:
            ChatServer.requests.append({"path": self.path, **body})
            ChatServer.in_flight += 1
            ChatServer.most_in_flight = max(ChatServer.most_in_flight, ChatServer.in_flight)
        try:
            time.sleep(30.0 if self.path == "/v1/slow" else 0.05)
            is_right = body["messages"][-1]["content"].endswith("4\nScore it.")
            content = {
                "/v1/score": "Score: 8/10" if is_right else "2",
                "/v1/labels": "Verdict: correct." if is_right else "This is incorrect",
                "/v1/garbage": "I would rather not say.",
            }.get(self.path, "5")
            answer = {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]
            }
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout case)
        finally:
            with ChatServer.lock:
                ChatServer.in_flight -= 1

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def host() -> Iterator[str]:
    ChatServer.requests, ChatServer.most_in_flight = [], 0
    with serving(ChatServer) as address:
        yield address


def judge(host: str, path: str = "score", **fields: Any) -> JudgeReward:
    return JudgeReward(url=f"http://{host}/v1/{path}", model="judge-model", rubric=RUBRIC, **fields)


def batch() -> RewardBatch:
    """One group of 4 for "2+2": two completions say 4."""
    example = Example(id="q0", prompt="What is 2+2?", answer="4", data={"topic": "arith"})
    completions = ["4", "5", "It is 4", "22"]
    return RewardBatch(
        run_id="r", step=1, examples=[example], prompts=[str(example.prompt)],
        completions=completions, num_tokens=[1] * 4,
    )  # fmt: skip


def test_the_judge_scores_each_completion_and_keeps_its_raw_answer(host: str) -> None:
    entry = judge(host, system="You grade arithmetic.", max_concurrency=2)
    outcome = Rewarder([entry], reward_hosts=[host]).score(batch())
    assert outcome.scores == {"judge": [8.0, 2.0, 8.0, 2.0]}
    answers = [outcome.extras[i]["judge.answer"] for i in range(4)]
    assert answers == ["Score: 8/10", "2", "Score: 8/10", "2"]
    first = next(
        r for r in ChatServer.requests if r["messages"][-1]["content"].endswith("4\nScore it.")
    )
    assert first["model"] == "judge-model" and first["temperature"] == 0.0
    assert first["messages"] == [
        {"role": "system", "content": "You grade arithmetic."},
        {"role": "user",
         "content": "Question: What is 2+2?\nReference: 4 (arith)\nAnswer: 4\nScore it."},
    ]  # fmt: skip
    assert ChatServer.most_in_flight == 2  # four requests, two at a time


def test_labels_map_the_judges_verdict_to_scores(host: str) -> None:
    entry = judge(host, "labels", labels={"correct": 1.0, "incorrect": 0.0}, label="verdict")
    outcome = Rewarder([entry], reward_hosts=[host]).score(batch())
    assert outcome.scores == {"verdict": [1.0, 0.0, 1.0, 0.0]}


@pytest.mark.parametrize(
    ("answer", "score"),
    [("7", 7.0), ("Score: 7/10", 7.0), ("from 0 to 10 I give 3.5", 3.5), ("10", 10.0)],
)
def test_a_number_is_read_from_the_answer(answer: str, score: float) -> None:
    assert parse_score(judge("127.0.0.1:1"), answer) == score


@pytest.mark.parametrize("answer", ["no idea", "11", "-1", ""])
def test_an_answer_without_a_number_in_range_is_unparsable(answer: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_score(judge("127.0.0.1:1"), answer)
    assert failure_kind(caught.value) == "unparsable_judge_answer"


def failure(entry: JudgeReward, host: str) -> RewardFunctionError:
    with pytest.raises(RewardFunctionError) as caught:
        Rewarder([entry], reward_hosts=[host]).score(batch())
    return caught.value


def test_a_garbage_answer_fails_as_an_unparsable_judge_answer(host: str) -> None:
    failed = failure(judge(host, "garbage"), host)
    assert failure_kind(failed) == "unparsable_judge_answer"
    assert "holds no number: 'I would rather not say.'" in str(failed)


def test_a_judge_slower_than_its_timeout_fails_as_a_timeout(host: str) -> None:
    started = time.monotonic()
    failed = failure(judge(host, "slow", timeout_s=0.3, max_retries=0), host)
    assert failure_kind(failed) == "timeout" and "timeout_s=0.3" in str(failed)
    # not waiting for the slow answers (30 s each): a bound far above the ~1 s it takes
    assert time.monotonic() - started < 20


def test_a_host_not_allowed_is_refused_at_submit_and_on_the_worker(host: str) -> None:
    entry = judge(host)
    refusal = kind_of(entry).check(entry, ServerFacts(reward_hosts=("judge.example",)))
    assert refusal is not None and refusal.field == "url" and host in refusal.message
    with pytest.raises(ValueError) as caught:
        Rewarder([entry], reward_hosts=["judge.example"])
    assert failure_kind(caught.value) == "host_refused"
    assert ChatServer.requests == []


ENTRY = TypeAdapter(RewardSpec)
BASE = {"name": "judge", "url": "http://judge.example/v1", "model": "m", "rubric": "{completion}"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"rubric": "Grade {prompt}"}, "rubric"),  # no {completion}
        ({"rubric": "{completion} {bad name}"}, "rubric"),
        ({"rubric": "{completion} {"}, "rubric"),
        ({"score_range": [10, 0]}, "judge"),
        ({"labels": {"Yes": 1, "yes": 0}}, "labels"),
        ({"labels": {}}, "labels"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"token_env": "GRPO_DATABASE_URL"}, "token_env"),
        ({"url": "file:///etc/passwd"}, "url"),
    ],
)
def test_bad_judge_entries_are_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ENTRY.validate_python({**BASE, **change})
    assert any(field in map(str, error["loc"]) for error in caught.value.errors()), caught.value


def test_a_rubric_may_hold_literal_braces() -> None:
    entry = ENTRY.validate_python({**BASE, "rubric": 'Answer {{"score": n}} for {completion}'})
    assert isinstance(entry, JudgeReward)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_run_keeps_each_judge_answer_beside_its_score(
    host: str, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny run trained by the worker's job with a judge reward: every stored completion
    has the judge's score and, in its `judge.answer` column, the judge's raw answer."""
    monkeypatch.setenv("GRPO_REWARD_HOSTS", host)
    get_settings.cache_clear()
    spec = {
        "name": "judged", "model": "builtin:tiny", "max_steps": 1, "prompts_per_step": 2,
        "num_generations": 2, "max_completion_length": 4, "save_steps": 0,
        "rewards": [{"name": "judge", "url": f"http://{host}/v1/score", "model": "m",
                     "rubric": RUBRIC.replace(" ({topic})", "")}],
        "reward_preflight_records": 0,  # the judge's requests counted are the step's
    }  # fmt: skip
    with TestClient(create_app(), base_url="http://localhost") as api:
        submitted = api.post("/api/runs", json=spec)
        assert submitted.status_code == 201, submitted.text
        run_id = submitted.json()["id"]
        run_job(run_id)
        run = api.get(f"/api/runs/{run_id}").json()
        assert run["status"] == "succeeded", run["error"]
    stored = [c for g in db.call(rescores.stored_groups, run_id, 1) for c in g["completions"]]
    assert len(stored) == 4 == len(ChatServer.requests)
    for completion in stored:
        answer = completion["extras"]["judge.answer"]
        assert answer in ("Score: 8/10", "2")
        assert completion["rewards"]["judge"] == (8.0 if answer == "Score: 8/10" else 2.0)
