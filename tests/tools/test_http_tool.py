"""`http` tools against a real server on 127.0.0.1: the call's payload, the bearer token
from an allowed variable, a 5xx retried, a 4xx and a host outside the list as the model's
error message (never a failed step), and the worker's own host check."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from grpo.spec.tools import HttpTool
from grpo.tools.calls import ToolCall
from grpo.tools.kind import ToolRunFacts
from grpo.tools.toolbox import Toolbox


class Endpoint(BaseHTTPRequestHandler):
    seen: list[tuple[str, dict, str | None]] = []
    failures_left = 0

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Endpoint.seen.append((self.path, body, self.headers.get("authorization")))
        if self.path == "/flaky" and Endpoint.failures_left:
            Endpoint.failures_left -= 1
            self.send_response(503)
            self.end_headers()
            return
        status, answer = (
            (404, {}) if self.path == "/missing" else (200, {"result": body["arguments"]["q"] * 2})
        )
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def toolbox(host: str, path: str, **knobs: object) -> Toolbox:
    entry = HttpTool(label="echo", url=f"http://{host}{path}", description="Echo.", **knobs)
    return Toolbox([entry], ToolRunFacts(run_id="r1", tool_hosts=(host,)), max_result_chars=100)


def test_a_call_posts_its_arguments_with_the_token_and_reads_the_result(host, monkeypatch):
    monkeypatch.setenv("GRPO_REWARD_TOKEN_ECHO", "s3cret")
    result = toolbox(host, "/echo", token_env="GRPO_REWARD_TOKEN_ECHO").call(
        ToolCall("echo", {"q": "ab"}), None
    )
    assert (result.content, result.is_error) == ("abab", False)
    assert Endpoint.seen[-1] == (
        "/echo",
        {"run_id": "r1", "name": "echo", "arguments": {"q": "ab"}},
        "Bearer s3cret",
    )


def test_a_5xx_is_retried_and_a_4xx_is_the_models_error(host):
    Endpoint.failures_left = 1
    assert (
        toolbox(host, "/flaky", max_retries=1).call(ToolCall("echo", {"q": "x"}), None).content
        == "xx"
    )
    missing = toolbox(host, "/missing").call(ToolCall("echo", {"q": "x"}), None)
    assert missing.is_error and "HTTP 404" in missing.content


def test_a_host_outside_the_list_is_refused_before_any_request(host):
    entry = HttpTool(label="echo", url="http://elsewhere.example/", description="Echo.")
    with pytest.raises(ValueError, match="not an allowed tool host"):
        Toolbox([entry], ToolRunFacts(tool_hosts=(host,)), max_result_chars=100)
