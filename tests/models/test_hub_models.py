"""A Hugging Face model id the API's machine cannot load is a 422 naming `model` at submit,
not a worker failure after the hub client's retries; the worker fails at its first try with
the same words (grpo/spec/hub.py). The hub is a local stub server answering as the hub does,
or one that hangs up on every connection; both count what they were asked, so a retry shows
as a second request whatever the machine's speed."""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from huggingface_hub import constants

from app.main import create_app
from grpo.models.loading import load_policy
from tests.store_fixture import store

__all__ = ["store"]

ANSWERS = {
    "org/there": (200, {}),
    "nobody/none": (404, {"X-Error-Code": "RepoNotFound"}),
    "org/gated": (403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "gated"}),
}


ASKED: list[str] = []
"""The path of every request either hub got."""


class _Hub(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        ASKED.append(self.path)
        repo_id = (
            self.path.removeprefix("/api/models/").split("?")[0].removesuffix("/revision/main")
        )
        status, headers = ANSWERS.get(repo_id, (404, {"X-Error-Code": "RepoNotFound"}))
        body = json.dumps({"id": repo_id, "sha": "0" * 40} if status == 200 else {}).encode()
        self.send_response(status)
        for key, value in {**headers, "Content-Type": "application/json"}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def hub_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _HangUp(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        _, path, _ = self.rfile.readline().decode().split(" ", 2)
        ASKED.append(path)  # and the connection closes with no answer


@pytest.fixture(scope="module")
def dead_hub_url() -> Iterator[str]:
    """A hub that takes every connection and hangs up: unreachable, and it counts the tries."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _HangUp)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache but for `org/cached`'s config.json, as a download leaves it."""
    cache = tmp_path / "hf-cache"
    snapshot = cache / "models--org--cached" / "snapshots" / ("1" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (cache / "models--org--cached" / "refs").mkdir()
    (cache / "models--org--cached" / "refs" / "main").write_text("1" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def asked_about(repo_id: str) -> list[str]:
    """The requests for the model (not the hub client's own, such as its daily fetch of
    /api/agent-harnesses)."""
    return [path for path in ASKED if repo_id in path]


UNREACHABLE = "http://127.0.0.1:9"  # the discard port: connection refused at once
UNREACHABLE_WORDS = "not in this machine's cache and the hub is unreachable"
CASES = [
    # (hub, HF_HUB_OFFLINE, model, status, words in the refusal)
    ("stub", False, "org/there", 201, None),
    ("stub", False, "hf:org/there", 201, None),
    ("dead", False, "org/cached", 201, None),
    ("stub", False, "nobody/none", 422, "does not exist on the hub"),
    ("stub", False, "org/gated", 422, "is gated"),
    ("dead", False, "nobody/none", 422, UNREACHABLE_WORDS),
    (UNREACHABLE, False, "nobody/none", 422, UNREACHABLE_WORDS),
    ("dead", True, "nobody/none", 422, "HF_HUB_OFFLINE is set"),
    ("stub", False, "org/" + "a" * 100, 422, "not a valid Hugging Face model id"),
]


@pytest.mark.usefixtures("hub_cache")
@pytest.mark.parametrize(("hub", "offline", "model", "status", "words"), CASES)
def test_a_hub_id_this_machine_cannot_load_is_a_422_naming_model(
    store: str,
    hub_url: str,
    dead_hub_url: str,
    monkeypatch: pytest.MonkeyPatch,
    hub: str,
    offline: bool,
    model: str,
    status: int,
    words: str | None,
) -> None:
    endpoint = {"stub": hub_url, "dead": dead_hub_url}.get(hub, hub)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    spec = {"name": "hub", "model": model, "max_steps": 1}
    ASKED.clear()
    with TestClient(create_app(), base_url="http://localhost") as api:
        response = api.post("/api/runs", json=spec)
    asks = asked_about(model.removeprefix("hf:"))
    assert len(asks) <= 1, f"the hub was asked {len(asks)} times (retries): {asks}"
    assert response.status_code == status, response.text
    if words is not None:
        error = response.json()["error"]
        assert error["fields"][0]["loc"] == "model"
        assert words in error["fields"][0]["message"]
        assert "GRPO_CHECK_HUB_MODELS=false" in error["fields"][0]["message"]


@pytest.mark.usefixtures("hub_cache")
def test_the_check_can_be_turned_off_for_workers_with_caches_of_their_own(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", UNREACHABLE)
    monkeypatch.setenv("GRPO_CHECK_HUB_MODELS", "false")
    with TestClient(create_app(), base_url="http://localhost") as api:
        response = api.post("/api/runs", json={"model": "nobody/none", "max_steps": 1})
    assert response.status_code == 201, response.text


@pytest.mark.usefixtures("hub_cache")
def test_the_worker_fails_at_its_first_try_with_the_same_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_hub_url: str
) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", dead_hub_url)
    heard: list[str] = []
    ASKED.clear()
    with pytest.raises(ValueError, match=UNREACHABLE_WORDS):
        load_policy(
            "nobody/none", cache_dir=tmp_path, progress=False, log=lambda _, m: heard.append(m)
        )
    # one probe, not from_pretrained's downloads and their retries (46 s of them)
    assert asked_about("nobody/none") == ["/api/models/nobody/none"]
    assert not heard  # nothing said to be downloading that never will
