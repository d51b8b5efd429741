"""Runs of dead workers: requeued while retries remain, then failed with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stack import run_store_script

SCRIPT = r"""
from datetime import timedelta
from app.store import runs
from app.store.models import utcnow
from grpo.spec import JobSpec

run, _ = runs.create_run(JobSpec(model="builtin:tiny"), package_version="t")
stale = utcnow() + timedelta(hours=1)  # every heartbeat so far is older than this
for attempt in (1, 2):
    assert runs.claim_run(run.id, worker=f"w{attempt}", device="cpu").attempts == attempt
    fresh, _ = runs.requeue_stale_runs(stale_before=utcnow() - timedelta(hours=1), max_retries=1)
    assert fresh == []  # a beating run is left alone
    requeued, failed = runs.requeue_stale_runs(stale_before=stale, max_retries=1)
    if attempt == 1:
        assert [r.id for r in requeued] == [run.id] and failed == []
        assert runs.get_run(run.id).status == "queued"
    else:
        assert requeued == [] and [r.id for r in failed] == [run.id]
final = runs.get_run(run.id)
assert final.status == "failed" and "w2 stopped responding" in final.error, final.error
assert "gave up after 1 retries" in final.error
print("ok")
"""


@pytest.mark.parametrize("store", ["postgres", "sqlite"])
def test_stale_runs_are_requeued_up_to_the_retry_limit_then_failed(
    store: str, tmp_path: Path
) -> None:
    run_store_script(SCRIPT, store=store, data_dir=tmp_path)
