"""Outages are answers, not 500s: PostgreSQL stopped mid-run (a cluster of the test's own)
gives 503 `database_unavailable` with Retry-After on every database route, on a connection
that stays open, and the run finishes with every step once; a full disk (a small tmpfs in
the API's own mount namespace) gives 507 "no space left" for uploads and downloads."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.settings import get_settings
from app.store import checkpoints, db, runs
from app.store.lease import Lease
from grpo.report import SavedCheckpoint
from grpo.spec import JobSpec
from tests.fixtures.service import tiny_spec
from tests.own_postgres import own_postgres
from tests.stack import REDIS_URL, Stack, running_stack
from tests.worker.test_faults import assert_every_step_once, wait_for
from tests.worker.test_run_lifecycle import wait_for_final

DATABASE_ROUTES = [
    ("GET", "/api/runs"),
    ("GET", "/api/runs/{id}"),
    ("GET", "/api/runs/{id}/metrics"),
    ("GET", "/api/runs/{id}/logs"),
    ("GET", "/api/datasets"),
    ("GET", "/api/workers"),
    ("POST", "/api/runs/{id}/clone"),
    ("POST", "/api/runs"),
]


def local_port(response: httpx.Response) -> int:
    """The client's port of the connection that carried the response."""
    return int(response.extensions["network_stream"].get_extra_info("client_addr")[1])


def test_postgres_stopped_mid_run_is_503_everywhere_and_the_run_finishes_once(
    tmp_path: Path,
) -> None:
    with (
        own_postgres() as postgres,
        running_stack(tmp_path / "stack", database_url=postgres.url, broker_url=REDIS_URL) as stack,
        stack.client() as client,
    ):
        spec = tiny_spec(stack, max_steps=12, save_steps=4)
        run = client.post("/api/runs", json=spec).json()
        url = f"/api/runs/{run['id']}"
        assert wait_for(lambda: client.get(url).json()["step"] >= 2, timeout=180)
        postgres.stop()
        try:
            first_port = None
            for method, path in DATABASE_ROUTES:
                body = spec if path == "/api/runs" else None
                answer = client.request(method, path.format(id=run["id"]), json=body)
                assert answer.status_code == 503, (method, path, answer.text)
                assert answer.json()["error"]["code"] == "database_unavailable"
                assert int(answer.headers["Retry-After"]) > 0
                first_port = first_port or local_port(answer)
                assert local_port(answer) == first_port, "the keep-alive connection was dropped"
            assert client.get("/api/health").status_code == 503
            time.sleep(8)  # a real outage: the worker meets it at its next writes
        finally:
            postgres.start()
        final = wait_for_final(client, run["id"], timeout=300)
        assert final["status"] == "succeeded", stack.logs()
        assert_every_step_once(client, final)
        assert "internal_error" not in (stack.data_dir / "api.log").read_text()


FULL_DISK_BYTES = 2 << 20


@pytest.fixture
def full_disk_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The API with its data directory on a 2 MiB tmpfs mounted in a mount namespace of its
    own (this test sees it through /proc/<pid>/root); the database is SQLite outside it."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    mount = f'mount -t tmpfs -o size={FULL_DISK_BYTES} tmpfs "$0" && exec "$@"'
    url = f"sqlite:///{tmp_path / 'grpo.db'}"
    for key in [k for k in os.environ if k.startswith("GRPO_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GRPO_DATA_DIR", str(data_dir))
    monkeypatch.setenv("GRPO_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        with running_stack(
            data_dir,
            database_url=url,
            with_worker=False,
            api_wrapper=["unshare", "-rm", "sh", "-c", mount, str(data_dir)],
        ) as stack:
            yield stack
    finally:
        db.get_engine().dispose()
        for cached in (get_settings, db.get_engine, db._session_factory):
            cached.cache_clear()


def seed_checkpoint(seen: Path) -> str:
    """A run with a checkpoint of 256 KiB written into the API's data directory (`seen`:
    that directory as this process sees it); returns the run's id."""
    spec = JobSpec(model="builtin:tiny", max_steps=1)
    run, _ = db.call(runs.create_run, spec, package_version="t")
    held = Lease.of(db.call(runs.claim_run, run.id, worker="w1", device="cpu"))
    model = seen / "runs" / run.id / "checkpoints" / "step-000001" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(os.urandom(256 << 10))  # gzip cannot shrink it
    recorded = get_settings().runs_dir / run.id / "checkpoints" / "step-000001"
    db.call(checkpoints.record_checkpoint, held, SavedCheckpoint(1, str(recorded), 1, True, (1,)))
    return run.id


def fill(folder: Path) -> None:
    """Write until the disk refuses: ENOSPC."""
    with pytest.raises(OSError, match="No space left"), open(folder / "filler", "wb") as handle:
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()


def test_a_full_disk_is_507_no_space_left_for_uploads_and_downloads(
    full_disk_stack: Stack,
) -> None:
    stack = full_disk_stack
    seen = Path(f"/proc/{stack.processes['api'].pid}/root") / str(stack.data_dir).lstrip("/")
    assert os.statvfs(seen).f_blocks * os.statvfs(seen).f_frsize <= FULL_DISK_BYTES
    run_id = seed_checkpoint(seen)
    fill(seen)
    with stack.client() as client:
        answers = [
            client.get(f"/api/runs/{run_id}/checkpoints/1/download"),
            client.post(
                "/api/datasets?name=d",
                content=b'{"prompt": "1+1", "answer": "2"}\n' * 2000,
                headers={"content-type": "application/x-ndjson"},
            ),
        ]
        for answer in answers:
            assert answer.status_code == 507, answer.text
            assert "no space left" in answer.json()["error"]["message"]
            assert answer.headers.get("connection") != "close"
        (seen / "filler").unlink()
        download = client.get(f"/api/runs/{run_id}/checkpoints/1/download")
        assert download.status_code == 200
    assert "Traceback" not in (stack.data_dir / "api.log").read_text()
