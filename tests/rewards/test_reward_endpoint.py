"""`http` rewards against a server in this process on 127.0.0.1 (grpo/rewards/http.py):
retries, bearer token from the worker's environment, concurrency, and the worker's own
host check."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from grpo.data.example import Example
from grpo.failures import RewardFunctionError
from grpo.rewards.batch import RewardBatch
from grpo.rewards.http import score_with_endpoint
from grpo.rewards.scoring import Rewarder
from grpo.spec import HttpReward
from tests.local_http import serving


class Judge(BaseHTTPRequestHandler):
    """Scores len(text); /flaky fails the first two requests; /together waits for 3
    requests to be in flight at once; /moved redirects."""

    calls: list[dict[str, object]] = []
    together = threading.Barrier(3, timeout=10)

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Judge.calls.append({"path": self.path, "auth": self.headers.get("authorization")})
        if self.path == "/flaky" and len(Judge.calls) <= 2:
            return self._answer(503, {})
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("location", "http://example.com/")
            self.send_header("content-length", "0")
            return self.end_headers()
        if self.path == "/together":
            Judge.together.wait()
        rewards = [[float(len(t)) for t in g["completions"]] for g in body["groups"]]
        return self._answer(200, {"rewards": rewards})

    def _answer(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Judge.calls = []
    with serving(Judge) as address:
        yield address


def _batch(num_groups: int = 3) -> RewardBatch:
    examples = [Example(id=f"q{b}", prompt=f"p{b}", answer="") for b in range(num_groups)]
    completions = [f"{'x' * b}{'y' * i}" for b in range(num_groups) for i in range(2)]
    return RewardBatch(
        run_id="r",
        step=1,
        examples=examples,
        prompts=[e.prompt for e in examples],
        completions=completions,
        num_tokens=[1] * len(completions),
    )


def test_5xx_is_retried_with_backoff_then_scores(server):
    entry = HttpReward(url=f"http://{server}/flaky", max_retries=2, groups_per_request=8)
    scores = score_with_endpoint(entry, _batch(), allowed_hosts=[server])
    assert scores == [0.0, 1.0, 1.0, 2.0, 2.0, 3.0]
    assert len(Judge.calls) == 3


def test_the_token_comes_from_the_worker_environment_variable(server, monkeypatch):
    monkeypatch.setenv("JUDGE_TOKEN", "s3cret")
    monkeypatch.setenv("GRPO_REWARD_TOKEN_JUDGE", "t0ken")
    entry = HttpReward(url=f"http://{server}/score", token_env="JUDGE_TOKEN")
    score_with_endpoint(entry, _batch(), allowed_hosts=[server], token_envs=["JUDGE_TOKEN"])
    prefixed = HttpReward(url=f"http://{server}/score", token_env="GRPO_REWARD_TOKEN_JUDGE")
    score_with_endpoint(prefixed, _batch(), allowed_hosts=[server])
    assert [call["auth"] for call in Judge.calls] == ["Bearer s3cret", "Bearer t0ken"]


@pytest.mark.parametrize(
    ("name", "listed"),
    [("JUDGE_TOKEN", []), ("JUDGE_TOKEN", ["JUDGE_TOKEN"]), ("GRPO_REWARD_TOKEN_NONE", [])],
)
def test_an_unset_or_unlisted_token_variable_is_one_error_and_nothing_is_sent(
    server, monkeypatch, name, listed
):
    monkeypatch.delenv("JUDGE_TOKEN", raising=False)
    if not listed:
        monkeypatch.setenv("JUDGE_TOKEN", "s3cret")  # set, but the operator did not list it
    entry = HttpReward(url=f"http://{server}/score", token_env=name)
    with pytest.raises(ValueError, match=f"token_env '{name}' is not a token this worker offers"):
        score_with_endpoint(entry, _batch(), allowed_hosts=[server], token_envs=listed)
    assert Judge.calls == []


def test_groups_are_posted_concurrently_up_to_max_concurrency(server):
    # the server answers only once three requests are in flight together
    entry = HttpReward(url=f"http://{server}/together", groups_per_request=1, max_concurrency=3)
    scores = score_with_endpoint(entry, _batch(3), allowed_hosts=[server])
    assert scores == [0.0, 1.0, 1.0, 2.0, 2.0, 3.0] and len(Judge.calls) == 3


def test_the_worker_refuses_a_host_it_does_not_allow_before_any_request(server):
    entry = HttpReward(url=f"http://{server}/score")
    with pytest.raises(ValueError, match="not in this worker's GRPO_REWARD_HOSTS"):
        Rewarder([entry], reward_hosts=["judge.internal"])
    with pytest.raises(ValueError, match="GRPO_REWARD_HOSTS"):
        score_with_endpoint(entry, _batch(), allowed_hosts=[])
    assert Judge.calls == []


def test_a_bare_host_allows_every_port_and_host_port_only_its_own(server):
    entry = HttpReward(url=f"http://{server}/score")
    assert score_with_endpoint(entry, _batch(1), allowed_hosts=["127.0.0.1"]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="GRPO_REWARD_HOSTS"):
        score_with_endpoint(entry, _batch(1), allowed_hosts=["127.0.0.1:1"])


def test_redirects_are_not_followed(server):
    entry = HttpReward(url=f"http://{server}/moved", max_retries=0)
    with pytest.raises(RewardFunctionError, match="HTTP 302 \\(not retried\\)"):
        score_with_endpoint(entry, _batch(), allowed_hosts=[server])


def test_a_closed_port_fails_after_every_attempt_naming_the_url(server):
    closed = "127.0.0.1:9"  # discard port: nothing listens here
    entry = HttpReward(url=f"http://{closed}/score", max_retries=1, label="judge")
    with pytest.raises(RewardFunctionError) as failure:
        score_with_endpoint(entry, _batch(), allowed_hosts=[closed])
    message = str(failure.value)
    assert "'judge'" in message and f"http://{closed}/score" in message
    assert "connection failed (no HTTP status)" in message and "after 2 attempt(s)" in message
