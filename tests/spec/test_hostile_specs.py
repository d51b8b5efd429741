"""Specs written to attack the worker, through the service: a reward endpoint that asks for
the worker's secrets, and patterns built to eat its memory.

A real listener (an http server started here) records every request a worker sends it; a
real worker process's memory is read with psutil. Nothing of ours is mocked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import psutil
import pytest
from sqlalchemy import create_engine, text

from tests.fixtures.service import tiny_spec
from tests.local_http import serving
from tests.stack import REDIS_URL, Stack, create_pg_database, drop_pg_database, running_stack
from tests.worker.test_run_lifecycle import wait_for_final

ADMIN = "admin-secret-7f3a9c"
JUDGE = "judge-token-51d2e8"
WORKER_ONLY = "worker-only-secret-0b6e4d"
SECRETS_ENV = {
    "GRPO_API_TOKENS": ADMIN,
    "GRPO_REWARD_TOKEN_JUDGE": JUDGE,
    "SITE_SECRET": WORKER_ONLY,
}


class Listener(BaseHTTPRequestHandler):
    """Scores every completion 0.5 and keeps each request's raw head and body."""

    seen: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = self.rfile.read(int(self.headers["content-length"]))
        Listener.seen.append(str(self.headers).encode() + body)
        groups = json.loads(body)["groups"]
        data = json.dumps({"rewards": [[0.5] * len(g["completions"]) for g in groups]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def listener() -> Iterator[str]:
    with serving(Listener) as host:
        yield host


@pytest.fixture(scope="module")
def secret_stack(tmp_path_factory: pytest.TempPathFactory, listener: str) -> Iterator[Stack]:
    """PostgreSQL + Redis with tokens: every GRPO_* a probe went after is set. The API lets
    specs name SITE_SECRET (GRPO_REWARD_TOKEN_ENVS); the worker's own list does not."""
    url = create_pg_database()
    env = {**SECRETS_ENV, "GRPO_REWARD_HOSTS": listener, "GRPO_REWARD_TOKEN_ENVS": "SITE_SECRET"}
    try:
        with running_stack(
            tmp_path_factory.mktemp("secrets"),
            database_url=url,
            broker_url=REDIS_URL,
            extra_env=env,
            with_worker=False,
        ) as stack:
            stack.env = {k: v for k, v in stack.env.items() if k != "GRPO_REWARD_TOKEN_ENVS"}
            stack.start_worker()
            yield stack
    finally:
        drop_pg_database(url)


def _endpoint_spec(stack: Stack, listener: str, token_env: str) -> dict[str, object]:
    reward = {"name": "http", "url": f"http://{listener}/score", "token_env": token_env}
    return tiny_spec(stack, max_steps=1, rewards=[reward])


@pytest.mark.parametrize(
    "token_env",
    ["GRPO_API_TOKENS", "GRPO_DATABASE_URL", "GRPO_BROKER_URL", "grpo_api_tokens", "HOME",
     "GRPO_REWARD_TOKEN_ENVS"],
)  # fmt: skip
def test_naming_a_setting_or_an_unlisted_variable_is_a_422_on_token_env(
    secret_stack: Stack, listener: str, token_env: str
) -> None:
    with secret_stack.client(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        response = client.post("/api/runs", json=_endpoint_spec(secret_stack, listener, token_env))
    assert response.status_code == 422, response.text
    (field,) = response.json()["error"]["fields"]
    assert field["loc"].endswith("token_env") and "GRPO_REWARD_TOKEN_" in field["message"]


def test_the_listener_sees_only_the_token_made_for_it(secret_stack: Stack, listener: str) -> None:
    Listener.seen.clear()
    with secret_stack.client(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        errors = {}
        # allowed by the API; on the worker, one not listed there and one not set there
        for name in ("GRPO_REWARD_TOKEN_JUDGE", "SITE_SECRET", "GRPO_REWARD_TOKEN_ABSENT"):
            response = client.post("/api/runs", json=_endpoint_spec(secret_stack, listener, name))
            assert response.status_code == 201, response.text
            run = wait_for_final(client, response.json()["id"])
            errors[name] = run["error"]
    assert errors["GRPO_REWARD_TOKEN_JUDGE"] is None, secret_stack.logs()
    assert Listener.seen and all(f"Bearer {JUDGE}".encode() in r for r in Listener.seen)
    # a missing variable reads as a forbidden one: no oracle for what the worker holds
    refused = {
        errors[n].replace(repr(n), "NAME") for n in ("SITE_SECRET", "GRPO_REWARD_TOKEN_ABSENT")
    }
    assert len(refused) == 1 and "is not a token this worker offers" in refused.pop()
    # every GRPO_* value but the listener's own address (the Host header) and the token
    public = ("GRPO_REWARD_HOSTS", "GRPO_REWARD_TOKEN_JUDGE")
    settings = {
        v for k, v in secret_stack.env.items() if k.upper().startswith("GRPO_") and k not in public
    }
    assert {ADMIN, secret_stack.env["GRPO_DATABASE_URL"], REDIS_URL} <= settings
    leaked = {v for v in settings | {WORKER_ONLY} for r in Listener.seen if v.encode() in r}
    assert not leaked


BOMBS = ["(?:(?:a{99}){99}){300}", "(?:(?:a{999}){999}){999}"]


@pytest.fixture(scope="module")
def pattern_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {"GRPO_REDISPATCH_AFTER_SECONDS": "1"}
    with running_stack(tmp_path_factory.mktemp("patterns"), extra_env=env) as stack:
        yield stack


def _regex_spec(stack: Stack, pattern: str, **overrides: object) -> dict[str, object]:
    return tiny_spec(stack, max_steps=1, rewards=[{"name": "regex", "pattern": pattern}],
                     **overrides)  # fmt: skip


@pytest.mark.parametrize("pattern", BOMBS)
def test_pattern_bombs_are_a_422_on_the_pattern(pattern_stack: Stack, pattern: str) -> None:
    """Refused before compiling (tests/rewards/test_patterns.py proves it with a spy on the
    compiler; bench/ holds no timing for it: it is counted, not timed)."""
    with pattern_stack.client() as client:
        response = client.post("/api/runs", json=_regex_spec(pattern_stack, pattern))
    assert response.status_code == 422, response.text
    (field,) = response.json()["error"]["fields"]
    assert field["loc"] == "rewards.0.regex.pattern" and "over the limit" in field["message"]


def test_stored_pattern_bombs_leave_the_worker_within_50_mb(pattern_stack: Stack) -> None:
    """As a server before the submit check would have stored them: the worker refuses to
    compile them, and its memory stays where a plain run left it."""
    worker = psutil.Process(pattern_stack.processes["worker"].pid)
    with pattern_stack.client() as client:
        warm = client.post("/api/runs", json=_regex_spec(pattern_stack, r"\d")).json()["id"]
        assert wait_for_final(client, warm)["status"] == "succeeded", pattern_stack.logs()
        baseline = worker.memory_info().rss
        bombs = []
        for pattern in BOMBS:
            parked = _regex_spec(pattern_stack, "a", resources={"queue": "nobody-listens"})
            run_id = client.post("/api/runs", json=parked).json()["id"]
            _store_as_old_server(pattern_stack, run_id, pattern)
            bombs.append(run_id)
        finals = [wait_for_final(client, run_id, timeout=120) for run_id in bombs]
    grown = (worker.memory_info().rss - baseline) / 2**20
    assert all(f["status"] == "failed" and "over the limit" in f["error"] for f in finals), finals
    assert grown < 50, f"worker RSS grew {grown:.0f} MB over its baseline"
    print(f"\nworker RSS after both bombs: {grown:+.1f} MB over its baseline")


def _store_as_old_server(stack: Stack, run_id: str, pattern: str) -> None:
    """Put `pattern` in the run's stored spec and its queue back to the worker's, unsent:
    the housekeeping sweep sends it."""
    engine = create_engine(f"sqlite:///{Path(stack.data_dir) / 'grpo.db'}")
    try:
        with engine.begin() as connection:
            stored = json.loads(
                connection.execute(
                    text("SELECT spec FROM run WHERE id = :id"), {"id": run_id}
                ).scalar_one()
            )
            stored["rewards"][0]["pattern"] = pattern
            stored["resources"]["queue"] = stack.queue
            connection.execute(
                text("UPDATE run SET spec = :spec, queue = :queue, dispatched_at = NULL "
                     "WHERE id = :id"),
                {"spec": json.dumps(stored), "queue": stack.queue, "id": run_id},
            )  # fmt: skip
    finally:
        engine.dispose()
