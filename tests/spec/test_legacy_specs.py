"""Runs stored before the issue-15 knobs still load: a spec with `sync_ref_every` (now TRL's
sync_ref_model / ref_model_sync_steps / ref_model_mixup_alpha) is read, shown and cloned."""

from __future__ import annotations

from sqlalchemy import select, update

from app.store.db import make_engine
from app.store.models import Run
from tests.fixtures.service import tiny_spec
from tests.stack import Stack

NEW_KEYS = {
    "sync_ref_model",
    "ref_model_sync_steps",
    "ref_model_mixup_alpha",
    "delta",
    "importance_sampling_level",
    "top_entropy_quantile",
    "entropy_coef",
    "multi_objective_aggregation",
    "dynamic_sampling",
    "min_p",
    "repetition_penalty",
    "stop",
}


def database_url(stack: Stack) -> str:
    return stack.env.get("GRPO_DATABASE_URL") or f"sqlite:///{stack.data_dir / 'grpo.db'}"


def test_a_run_stored_with_sync_ref_every_is_read_and_cloned_as_reference_sync(
    stack: Stack,
) -> None:
    with stack.client() as client:
        spec = tiny_spec(stack, resources={"queue": "parked-no-worker"})
        run_id = client.post("/api/runs", json=spec).json()["id"]
        engine = make_engine(database_url(stack))
        with engine.begin() as conn:
            stored = conn.execute(select(Run.spec).where(Run.id == run_id)).scalar_one()
            legacy = {k: v for k, v in stored.items() if k not in NEW_KEYS} | {"sync_ref_every": 2}
            conn.execute(update(Run).where(Run.id == run_id).values(spec=legacy))
        engine.dispose()

        assert client.get(f"/api/runs/{run_id}").json()["spec"]["sync_ref_every"] == 2
        client.post(f"/api/runs/{run_id}/cancel")
        clone = client.post(f"/api/runs/{run_id}/clone", json={"patch": {"beta": 0.1}})
        assert clone.status_code == 201, clone.text
        cloned = clone.json()["spec"]
        assert "sync_ref_every" not in cloned
        assert (cloned["sync_ref_model"], cloned["ref_model_sync_steps"]) == (True, 2)
        assert cloned["ref_model_mixup_alpha"] == 1.0 and cloned["beta"] == 0.1
