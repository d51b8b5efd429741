"""Checkpoint list and download through the real app and store: the archive holds the
model directory, a cut download resumes with Range, weights need a token whenever tokens
are configured, nothing outside the run's directory is served, and a checkpoint is found
under this server's run directory wherever its worker mounted the shared data."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import get_settings
from app.store import checkpoints, db, runs
from app.store.lease import Lease
from grpo.report import SavedCheckpoint
from grpo.spec import JobSpec
from tests.store_fixture import store

__all__ = ["store"]


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def run_with_checkpoints(
    steps: list[int], *, outside: Path | None = None, recorded_in: Path | None = None
) -> str:
    """A claimed run whose worker wrote these checkpoints (a small model directory each);
    `recorded_in`: where the worker saw them (it mounts the data directory there)."""
    run, _ = db.call(
        runs.create_run, JobSpec(model="builtin:tiny", max_steps=steps[-1]), package_version="t"
    )
    claimed = db.call(runs.claim_run, run.id, worker="w1", device="cpu")
    assert claimed is not None
    held = Lease.of(claimed)
    root = outside or get_settings().runs_dir / run.id / "checkpoints"
    for step in steps:
        model = root / f"step-{step:06d}" / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text(f'{{"step": {step}}}')
        (model / "model.safetensors").write_bytes(bytes(range(256)) * 64 * step)
        path = (recorded_in or root) / model.parent.name
        saved = SavedCheckpoint(step, str(path), 1, step == steps[-1], tuple(steps))
        db.call(checkpoints.record_checkpoint, held, saved)
    return run.id


def members(body: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def test_checkpoints_are_listed_and_downloaded_whole_or_resumed(api: TestClient) -> None:
    run_id = run_with_checkpoints([2, 4])
    answer = api.get(f"/api/runs/{run_id}/checkpoints")
    assert answer.status_code == 200, answer.text
    listed = answer.json()["items"]
    assert [(c["step"], c["is_final"]) for c in listed] == [(2, False), (4, True)]

    whole = api.get(listed[1]["download_url"])
    assert whole.status_code == 200, whole.text
    assert whole.headers["content-length"] == str(len(whole.content))
    assert f"{run_id}-step-000004.tar.gz" in whole.headers["content-disposition"]
    files = members(whole.content)
    top = f"{run_id}-step-000004"
    assert files[f"{top}/config.json"] == b'{"step": 4}'
    assert files[f"{top}/model.safetensors"] == bytes(range(256)) * 64 * 4

    latest = api.get(f"/api/runs/{run_id}/checkpoints/latest/download")
    assert latest.content == whole.content  # built once, served again from the cache
    cut = len(whole.content) // 3
    rest = api.get(listed[1]["download_url"], headers={"Range": f"bytes={cut}-"})
    assert rest.status_code == 206
    assert whole.content[:cut] + rest.content == whole.content

    older = api.get(f"/api/runs/{run_id}/checkpoints/2/download")
    assert members(older.content)[f"{run_id}-step-000002/config.json"] == b'{"step": 2}'


def test_missing_pruned_and_foreign_checkpoints_are_404s(api: TestClient, tmp_path: Path) -> None:
    run_id = run_with_checkpoints([2])
    missing = api.get(f"/api/runs/{run_id}/checkpoints/3/download")
    assert missing.status_code == 404 and "there are: 2" in missing.json()["error"]["message"]
    assert api.get(f"/api/runs/{run_id}/checkpoints/x/download").status_code == 422

    for path in (
        get_settings().runs_dir / run_id / "checkpoints" / "step-000002" / "model"
    ).iterdir():
        path.unlink()
    (get_settings().runs_dir / run_id / "checkpoints" / "step-000002" / "model").rmdir()
    pruned = api.get(f"/api/runs/{run_id}/checkpoints/latest/download")
    assert pruned.status_code == 404 and "not here" in pruned.json()["error"]["message"]

    foreign = run_with_checkpoints([1], outside=tmp_path / "elsewhere")
    refused = api.get(f"/api/runs/{foreign}/checkpoints/1/download")
    assert refused.status_code == 404  # the recorded path is not followed out of the run
    assert "not here" in refused.json()["error"]["message"]

    fresh = db.call(runs.create_run, JobSpec(model="builtin:tiny"), package_version="t")[0]
    assert api.get(f"/api/runs/{fresh.id}/checkpoints").json() == {"items": []}
    assert api.get(f"/api/runs/{fresh.id}/checkpoints/latest/download").status_code == 404


def test_weights_need_a_token_even_where_reads_are_open(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = run_with_checkpoints([1])
    monkeypatch.setenv("GRPO_API_TOKENS", "alpha-token")
    get_settings.cache_clear()
    url = f"/api/runs/{run_id}/checkpoints/1/download"
    assert api.get(f"/api/runs/{run_id}").status_code == 200  # reads stay open
    assert api.get(f"/api/runs/{run_id}/checkpoints").status_code == 401
    assert api.get(url).status_code == 401
    assert api.get(url, headers={"Authorization": "Bearer beta"}).status_code == 403
    assert api.get(url, headers={"Authorization": "Bearer alpha-token"}).status_code == 200


def test_merge_true_turns_a_lora_adapter_into_full_weights_that_compute_the_same(
    api: TestClient, tmp_path: Path
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

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
    with torch.no_grad():  # B starts at zero: give the adapter something to merge
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    workdir = get_settings().runs_dir / run.id
    path = save_checkpoint(
        workdir, 1, model=model, tokenizer=tokenizer, state={}, marks=RunMarks(spec_json(spec))
    )
    saved = SavedCheckpoint(1, str(path), 1, True, (1,))
    db.call(checkpoints.record_checkpoint, Lease.of(claimed), saved)

    url = f"/api/runs/{run.id}/checkpoints/1/download"
    adapter = members(api.get(url).content)
    assert f"{run.id}-step-000001/adapter_config.json" in adapter
    merged = api.get(url, params={"merge": "true"})
    assert merged.status_code == 200, merged.text
    assert f"{run.id}-step-000001-merged.tar.gz" in merged.headers["content-disposition"]
    with tarfile.open(fileobj=io.BytesIO(merged.content)) as tar:
        tar.extractall(tmp_path, filter="data")
    names = {p.name for p in (tmp_path / f"{run.id}-step-000001-merged").iterdir()}
    assert "adapter_config.json" not in names and "model.safetensors" in names
    full = AutoModelForCausalLM.from_pretrained(tmp_path / f"{run.id}-step-000001-merged")
    ids = torch.tensor([[1, 5, 9, 13, 2, 7]])
    with torch.no_grad():
        expected, got = model(ids).logits, full(ids).logits
    assert (expected - base_logits(spec, ids)).abs().max() > 1e-3  # the adapter changes it
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def base_logits(spec: JobSpec, ids: object) -> object:
    import torch

    from grpo.models.loading import load_policy

    base, _ = load_policy(spec.model, cache_dir=get_settings().resolved_cache_dir)
    with torch.no_grad():
        return base(ids).logits


def test_a_checkpoint_a_worker_recorded_under_its_own_mount_is_served_from_ours(
    api: TestClient,
) -> None:
    # a worker on another node mounts the shared data directory at /mnt/grpo-data
    run_id = run_with_checkpoints([3], recorded_in=Path("/mnt/grpo-data/runs/x/checkpoints"))
    answer = api.get(f"/api/runs/{run_id}/checkpoints/3/download")
    assert answer.status_code == 200, answer.text
    assert members(answer.content)[f"{run_id}-step-000003/config.json"] == b'{"step": 3}'
