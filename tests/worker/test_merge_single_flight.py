"""Merged downloads are single-flight: ten concurrent `?merge=true` downloads of one
uncached LoRA checkpoint start one merge process, and all ten bodies are byte-identical
(issue 25 item 4; before, ten merges raced and clients got five different archives)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest

from app.settings import get_settings
from app.store import checkpoints, db, runs
from app.store.lease import Lease
from grpo.report import SavedCheckpoint
from grpo.spec import JobSpec
from tests.stack import Stack, running_stack


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The API on the embedded store, which this process's store talks to as well."""
    for key in [k for k in os.environ if k.startswith("GRPO_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GRPO_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        with running_stack(tmp_path, with_worker=False) as stack:
            yield stack
    finally:
        if db._session_factory.cache_info().currsize:
            db.get_engine().dispose()
        for cached in (get_settings, db.get_engine, db._session_factory):
            cached.cache_clear()


def lora_checkpoint() -> str:
    """A run with one LoRA checkpoint (adapter and tokenizer) on disk and in the store."""
    from grpo.checkpoints.files import RunMarks, save_checkpoint
    from grpo.models.loading import load_policy
    from grpo.models.lora import apply_lora
    from grpo.spec.resume import spec_json

    spec = JobSpec(model="builtin:tiny", max_steps=1, lora={"r": 4})
    run, _ = db.call(runs.create_run, spec, package_version="t")
    claimed = db.call(runs.claim_run, run.id, worker="w1", device="cpu")
    assert claimed is not None
    base, tokenizer = load_policy(spec.model, cache_dir=get_settings().resolved_cache_dir)
    model = apply_lora(base, spec.lora)  # type: ignore[arg-type]
    path = save_checkpoint(
        get_settings().runs_dir / run.id, 1, model=model, tokenizer=tokenizer, state={},
        marks=RunMarks(spec_json(spec)),
    )  # fmt: skip
    db.call(
        checkpoints.record_checkpoint,
        Lease.of(claimed),
        SavedCheckpoint(1, str(path), 1, True, (1,)),
    )
    return run.id


def watch_merges(api_pid: int, seen: set[int], stop: threading.Event) -> None:
    """Every merge subprocess the API process starts, by pid."""
    api = psutil.Process(api_pid)
    while not stop.is_set():
        for child in api.children(recursive=True):
            try:
                if "grpo.checkpoints.merge" in " ".join(child.cmdline()):
                    seen.add(child.pid)
            except psutil.Error:
                pass
        time.sleep(0.01)


def test_ten_concurrent_merged_downloads_run_one_merge_and_get_one_body(api: Stack) -> None:
    run_id = lora_checkpoint()
    url = f"{api.url}/api/runs/{run_id}/checkpoints/1/download"
    merges: set[int] = set()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_merges, args=(api.processes["api"].pid, merges, stop))
    watcher.start()
    try:
        with ThreadPoolExecutor(max_workers=10) as pool:
            answers = list(
                pool.map(lambda _: httpx.get(url, params={"merge": "true"}, timeout=300), range(10))
            )
    finally:
        stop.set()
        watcher.join()
    assert [a.status_code for a in answers] == [200] * 10, answers[0].text
    bodies = {a.content for a in answers}
    assert len(bodies) == 1
    assert all(int(a.headers["content-length"]) == len(answers[0].content) for a in answers)
    assert len(merges) == 1, merges
    exports = get_settings().runs_dir / run_id / "exports"
    assert [p.name for p in exports.glob("*merged.tar.gz")] and not list(exports.glob(".merge-*"))
