"""The Python client of the REST API (httpx): the CLI's submit/runs/cancel/logs use it, and
`from grpo import submit` (grpo/python_api.py). The one REST client of the project.

Speaks only HTTP: it works against any server, local or remote. Knows nothing of torch or of
the server's code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import httpx

RETRY_MIN_S = 0.5
RETRY_MAX_S = 10.0
"""Waits between reconnects of an event stream: doubling while the server stays away."""


UPLOAD_CHUNK = 1 << 20
"""Bytes an upload reads and sends at a time."""
UPLOAD_TIMEOUT = httpx.Timeout(30, read=600)
"""The server checks an upload's every record before it answers: a large one takes minutes."""


def _chunks(body: BinaryIO, sent: Callable[[int], object] | None) -> Iterator[bytes]:
    while chunk := body.read(UPLOAD_CHUNK):
        yield chunk
        if sent is not None:
            sent(len(chunk))


class ApiClientError(RuntimeError):
    """An error answer of the API, with its message (and field errors for a bad spec)."""


def error_text(error: dict[str, Any]) -> str:
    """An error answer as the CLI prints it, each problem once: a 422's message already
    lists its first five field problems after what was refused (app/api/errors.py), so they
    go one to a line after that lead; a field the message does not name gets a line too."""
    message = str(error["message"])
    fields = error.get("fields") or []
    lines = [f"{f['loc']}: {f['message']}" for f in fields]
    summary = f": {'; '.join(lines[:5])}"
    if lines and message.endswith(summary):
        return message.removesuffix(summary) + ":" + "".join(f"\n  {line}" for line in lines)
    unsaid = [line for line, f in zip(lines, fields, strict=True) if f["message"] not in message]
    return message + "".join(f"\n  {line}" for line in unsaid)


REWARD_TEST_TIMEOUT = 150.0
"""Seconds a reward test or preflight may take: the server's two minutes, and its start."""


class GrpoClient:
    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 30) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def _json(self, response: httpx.Response) -> Any:
        if response.is_error:
            try:
                error = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                raise ApiClientError(
                    f"HTTP {response.status_code}: {response.text[:200]}"
                ) from None
            raise ApiClientError(error_text(error))
        return response.json() if response.content else None

    def submit(self, spec: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._json(self.http.post("/api/runs", json=spec, headers=headers))  # type: ignore[no-any-return]

    def runs(self, *, status: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        params: dict[str, str | int] = {"limit": limit}
        if status:
            params["status"] = status
        return self._json(self.http.get("/api/runs", params=params))["items"]  # type: ignore[no-any-return]

    def run(self, run_id: str) -> dict[str, Any]:
        return self._json(self.http.get(f"/api/runs/{run_id}"))  # type: ignore[no-any-return]

    def cancel(self, run_id: str) -> dict[str, Any]:
        return self._json(self.http.post(f"/api/runs/{run_id}/cancel"))  # type: ignore[no-any-return]

    def resume(self, run_id: str) -> dict[str, Any]:
        return self._json(self.http.post(f"/api/runs/{run_id}/resume"))  # type: ignore[no-any-return]

    def clone(self, run_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        body = {"patch": patch}
        return self._json(self.http.post(f"/api/runs/{run_id}/clone", json=body))  # type: ignore[no-any-return]

    def upload_dataset(
        self,
        path: Path,
        *,
        name: str,
        prompt_field: str,
        answer_field: str,
        sent: Callable[[int], object] | None = None,
    ) -> dict[str, Any]:
        """POST the file as it is, newlines kept (what curl's --data-binary does; the server
        tells parquet by its magic bytes); `sent` is called with each chunk's size as it
        goes. An empty `answer_field`: the records have none."""
        params = {"name": name, "prompt_field": prompt_field, "answer_field": answer_field}
        headers = {
            "content-type": "application/x-ndjson",
            "content-length": str(path.stat().st_size),
        }
        with path.open("rb") as body:
            response = self.http.post(
                "/api/datasets",
                params=params,
                content=_chunks(body, sent),
                headers=headers,
                timeout=UPLOAD_TIMEOUT,
            )
        return self._json(response)  # type: ignore[no-any-return]

    def check_spec(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Every problem the server would refuse `spec` for, each {loc, message}; nothing
        is stored or run."""
        return self.check(spec)["problems"]

    def spec_warnings(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """What the server would accept in `spec` but will not go as meant, each {loc,
        message}: a model with random weights, which cannot learn (the new-run page's
        warnings); nothing is stored or run."""
        return self.check(spec)["warnings"]

    def check(self, spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """POST /api/specs/check: {problems, warnings}; a server from before warnings
        answers none."""
        answer = self._json(self.http.post("/api/specs/check", json=spec))
        return {"problems": answer["problems"], "warnings": answer.get("warnings", [])}

    def reward_test(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/rewards/test: {results}, one per sample (it may take the server's two
        minutes)."""
        answer = self.http.post("/api/rewards/test", json=body, timeout=REWARD_TEST_TIMEOUT)
        return self._json(answer)  # type: ignore[no-any-return]

    def reward_preflight(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/rewards/preflight: {records, probes, findings, stopped}."""
        answer = self.http.post("/api/rewards/preflight", json=body, timeout=REWARD_TEST_TIMEOUT)
        return self._json(answer)  # type: ignore[no-any-return]

    def rescore(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/runs/{id}/rescore: the queued replay ({rewards, steps} as asked)."""
        return self._json(self.http.post(f"/api/runs/{run_id}/rescore", json=body))  # type: ignore[no-any-return]

    def replay(self, run_id: str, rescore_id: int) -> dict[str, Any]:
        """GET /api/runs/{id}/rescores/{rescore_id}: its status, summary and groups."""
        return self._json(self.http.get(f"/api/runs/{run_id}/rescores/{rescore_id}"))  # type: ignore[no-any-return]

    def datasets(self) -> list[dict[str, Any]]:
        return self._json(self.http.get("/api/datasets"))["items"]  # type: ignore[no-any-return]

    def diagnostics(self, run_id: str) -> dict[str, Any]:
        """The run doctor's findings: {step, rules_version, items}."""
        return self._json(self.http.get(f"/api/runs/{run_id}/diagnostics"))  # type: ignore[no-any-return]

    def logs(self, run_id: str) -> list[dict[str, Any]]:
        return self._json(self.http.get(f"/api/runs/{run_id}/logs"))["items"]  # type: ignore[no-any-return]

    def checkpoints(self, run_id: str) -> list[dict[str, Any]]:
        return self._json(self.http.get(f"/api/runs/{run_id}/checkpoints"))["items"]  # type: ignore[no-any-return]

    def download_checkpoint(
        self, run_id: str, which: str, part: Path, *, merge: bool = False
    ) -> str:
        """Stream a checkpoint's .tar.gz into `part`, resuming after the bytes already in it
        (HTTP Range); returns the file name the server gives it."""
        have = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        url = f"/api/runs/{run_id}/checkpoints/{which}/download"
        params = {"merge": "true"} if merge else {}
        with self.http.stream("GET", url, params=params, headers=headers, timeout=None) as response:
            if response.status_code == 416:  # nothing left to send: the part is whole
                return part.name
            self._raise_for(response)
            mode = "ab" if response.status_code == 206 else "wb"
            with part.open(mode) as out:
                for chunk in response.iter_bytes(1 << 20):
                    out.write(chunk)
            disposition = response.headers.get("content-disposition", "")
        return disposition.rpartition("filename=")[2].strip('"') or part.name

    def events(self, run_id: str, *, last_event_id: int | None = None) -> Iterator[tuple[str, Any]]:
        """(kind, data) for each event until the run ends; resumes by id after a dropped link,
        waiting RETRY_MIN_S, then twice as long each time up to RETRY_MAX_S, until an event
        comes through again."""
        delay = RETRY_MIN_S
        while True:
            headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
            try:
                with self.http.stream(
                    "GET", f"/api/runs/{run_id}/events", headers=headers, timeout=None
                ) as response:
                    self._raise_for(response)
                    for event_id, kind, data in parse_sse(response.iter_lines()):
                        delay = RETRY_MIN_S
                        last_event_id = event_id if event_id is not None else last_event_id
                        yield kind, data
                        if kind == "end":
                            return
            except httpx.TransportError:
                pass  # the server is down or the link dropped: wait, then resume
            time.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def _raise_for(self, response: httpx.Response) -> None:
        if response.is_error:
            response.read()
            self._json(response)


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[int | None, str, Any]]:
    fields: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            continue
        if line:
            key, _, value = line.partition(":")
            fields[key] = value.removeprefix(" ")
            continue
        if "data" in fields:
            event_id = int(fields["id"]) if "id" in fields else None
            yield event_id, fields.get("event", "message"), json.loads(fields["data"])
        fields = {}
