"""Bad input is a 4xx naming the field or the line, never a 500, on both stores (issue 10,
items 8-11): NUL characters, integers past 64 bits, hostile JSONL lines, reused idempotency
keys, oversized and chunked bodies, and requests a web page could forge."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import psutil

from tests.api.test_api_runs import JSONL, parked_spec
from tests.stack import Stack

HUGE = str(2**70)


def _fields(response: httpx.Response) -> list[str]:
    return [f["loc"] for f in response.json()["error"].get("fields", [])]


def test_nul_characters_are_refused_naming_the_field(stack: Stack) -> None:
    with stack.client() as client:
        named = client.post("/api/runs", json=parked_spec(stack, name="a\x00b"))
        assert named.status_code == 422 and _fields(named) == ["name"], named.text
        model = client.post("/api/runs", json=parked_spec(stack, model="org/a\x00b"))
        assert model.status_code == 422 and _fields(model) == ["model"], model.text
        nested = client.post("/api/runs", json=parked_spec(stack, data={"split": "tr\x00in"}))
        assert nested.status_code == 422 and _fields(nested) == ["data.split"], nested.text
        search = client.get("/api/runs", params={"q": "a\x00"})
        assert search.status_code == 422 and _fields(search) == ["query.q"], search.text
        assert search.json()["error"]["message"].startswith("invalid request")
        upload = client.post(
            "/api/datasets",
            params={"name": "n\x00"},
            content=b'{"prompt":"p","answer":"a"}\n',
            headers=JSONL,
        )
        assert upload.status_code == 422 and _fields(upload) == ["query.name"], upload.text
        assert client.get("/api/runs/ab%00cd").status_code == 422


def test_integers_past_64_bits_are_refused_naming_the_parameter(stack: Stack) -> None:
    with stack.client() as client:
        run_id = client.post("/api/runs", json=parked_spec(stack)).json()["id"]
        base = f"/api/runs/{run_id}"
        cases = [
            (f"{base}/metrics?after_step={HUGE}", "query.after_step"),
            (f"{base}/histograms?after_step={HUGE}", "query.after_step"),
            (f"{base}/steps/{HUGE}/groups", "path.step"),
            (f"{base}/steps/1/groups/{HUGE}", "path.index"),
            (f"{base}/events?after={HUGE}", "query.after"),
        ]
        for url, loc in cases:
            response = client.get(url)
            assert response.status_code == 422 and _fields(response) == [loc], (url, response.text)
        resumed = client.get(f"{base}/events", headers={"Last-Event-ID": HUGE})
        assert resumed.status_code == 422 and _fields(resumed) == ["header.last-event-id"]


def test_percent_and_underscore_in_a_search_are_literal(stack: Stack) -> None:
    tag = uuid.uuid4().hex[:8]
    with stack.client() as client:
        for name in (f"{tag}-a%b", f"{tag}-axb", f"{tag}-c_d", f"{tag}-cxd"):
            client.post("/api/runs", json=parked_spec(stack, name=name))
        for q, expected in ((f"{tag}-a%", [f"{tag}-a%b"]), (f"{tag}-c_d", [f"{tag}-c_d"])):
            items = client.get("/api/runs", params={"q": q}).json()["items"]
            assert [r["name"] for r in items] == expected


def _upload(client: httpx.Client, lines: list[str]) -> httpx.Response:
    body = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n"
    return client.post("/api/datasets", params={"name": "edge"}, content=body, headers=JSONL)


def test_hostile_dataset_lines_are_refused_naming_the_line(stack: Stack) -> None:
    good = json.dumps({"prompt": "1+1=", "answer": "2"})
    cases = [
        ('{"prompt": "p", "answer": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "line 2"),
        ('{"prompt": "p", "answer": ' + "9" * 5000 + "}", "line 2"),
        ('{"prompt": "\\ud800", "answer": "a"}', "line 2: lone surrogate"),
        ('{"prompt": "a\\u0000b", "answer": "a"}', "line 2: NUL"),
    ]
    with stack.client() as client:
        for line, reason in cases:
            response = _upload(client, [good, line])
            assert response.status_code == 422, (line[:60], response.text)
            assert reason in response.json()["error"]["message"], response.text


def test_unicode_line_separators_inside_json_strings_are_valid_jsonl(stack: Stack) -> None:
    lines = [
        json.dumps({"prompt": "a\u2028b", "answer": "1"}, ensure_ascii=False),
        json.dumps({"prompt": "c\u0085d\u2029", "answer": "2"}, ensure_ascii=False),
    ]
    with stack.client() as client:
        response = _upload(client, lines)
        assert response.status_code == 201, response.text
        assert response.json()["num_records"] == 2


def test_reusing_an_idempotency_key_for_another_spec_is_a_422_naming_the_key(
    stack: Stack,
) -> None:
    key = f"key-{uuid.uuid4().hex}"
    headers = {"Idempotency-Key": key}
    with stack.client() as client:
        first = client.post("/api/runs", json=parked_spec(stack), headers=headers)
        again = client.post("/api/runs", json=parked_spec(stack), headers=headers)
        other = client.post("/api/runs", json=parked_spec(stack, max_steps=4), headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert other.status_code == 422, other.text
    assert key in other.json()["error"]["message"]
    assert _fields(other) == ["header.idempotency-key"]


def _chunks(total: int, piece: bytes) -> Iterator[bytes]:
    for _ in range(total // len(piece)):
        yield piece


def test_chunked_bodies_past_a_limit_are_413(stack: Stack) -> None:
    with stack.client() as client:
        spec = client.post(
            "/api/runs",
            content=_chunks(2_000_000, b" " * 10_000),
            headers={"content-type": "application/json"},
        )
        assert spec.status_code == 413, spec.text


def test_uploads_stream_to_disk_instead_of_memory(stack: Stack) -> None:
    """A 40 MB upload: the API process grows by far less than the body (it grew ~1.5x the
    body when the route read it whole)."""
    line = json.dumps({"prompt": "x" * 150, "answer": "y"}).encode() + b"\n"
    count = 40_000_000 // len(line)
    api = psutil.Process(stack.processes["api"].pid)
    before = api.memory_info().rss
    peak = [before]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], api.memory_info().rss)
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with httpx.Client(base_url=stack.url, timeout=120) as client:
            body = (line * 1000 for _ in range(count // 1000))
            response = client.post(
                "/api/datasets", params={"name": "big"}, content=body, headers=JSONL
            )
    finally:
        done.set()
        watcher.join()
    assert response.status_code == 201, response.text
    assert response.json()["num_records"] == count // 1000 * 1000
    assert peak[0] - before < 20_000_000, f"API grew {(peak[0] - before) / 1e6:.0f} MB"


def test_oversized_uploads_are_413_declared_or_chunked(stack: Stack) -> None:
    limit = 64_000_000  # GRPO_MAX_DATASET_BYTES default
    with httpx.Client(base_url=stack.url, timeout=120) as client:
        chunked = client.post(
            "/api/datasets",
            params={"name": "big"},
            content=_chunks(limit + 1_000_000, b"x" * 1_000_000),
            headers=JSONL,
        )
        assert chunked.status_code == 413, chunked.text
    assert _status_of_declared_upload(stack, limit + 1).startswith(b"HTTP/1.1 413")
    leftovers = list((stack.data_dir / "datasets").glob(".upload-*"))
    assert not leftovers


def _status_of_declared_upload(stack: Stack, length: int) -> bytes:
    """The status line answered to headers that declare `length` bytes, before any is sent."""
    host, port = stack.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(
            f"POST /api/datasets?name=big HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/x-ndjson\r\nContent-Length: {length}\r\n\r\n".encode()
        )
        return conn.recv(4096).split(b"\r\n", 1)[0]


def test_requests_a_web_page_could_forge_are_refused(stack: Stack) -> None:
    port = stack.url.rsplit(":", 1)[1]
    with stack.client() as client:
        plain = client.post(
            "/api/runs",
            content=json.dumps(parked_spec(stack)),
            headers={"content-type": "text/plain"},
        )
        assert plain.status_code == 415, plain.text
        upload = client.post(
            "/api/datasets",
            params={"name": "x"},
            content=b'{"prompt":"p","answer":"a"}\n',
            headers={"content-type": "text/plain"},
        )
        assert upload.status_code == 415, upload.text
        foreign = client.post(
            "/api/runs", json=parked_spec(stack), headers={"Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "forbidden_origin"
        same = client.post(
            "/api/runs", json=parked_spec(stack), headers={"Origin": f"http://127.0.0.1:{port}"}
        )
        assert same.status_code == 201, same.text
        rebound = client.get("/api/runs", headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 400 and rebound.json()["error"]["code"] == "bad_host"
        assert client.get("/api/runs", headers={"Host": f"localhost:{port}"}).status_code == 200
        bodyless = client.post(f"/api/runs/{same.json()['id']}/cancel")
        assert bodyless.status_code == 200, bodyless.text
