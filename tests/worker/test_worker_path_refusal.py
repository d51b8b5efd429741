"""The worker's re-check of the allowed roots (a spec stored before a root was removed, or
edited in the database) refuses in the API's words, letter for letter: how a relative path
resolves against GRPO_DATA_DIR, that GRPO_MODEL_ROOTS is read at start, what to do (issue
44). One definition, grpo/spec/sources.py's OutsideRoots. The real app, store and worker
wiring (worker/training.py, as a run's every rank builds it) in the test process."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from grpo.failures import user_message
from grpo.spec import JobSpec
from grpo.spec.sources import OutsideRoots
from tests.store_fixture import store
from worker.training import train_silently

__all__ = ["store"]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("field", "value", "loc"),
    [("data", {"source": "p.jsonl"}, "data.source"), ("model", "./my-model", "model")],
)
def test_the_worker_refuses_a_path_outside_the_roots_in_the_apis_words(
    store: str, field: str, value: object, loc: str
) -> None:
    spec = {"name": "outside", "model": "builtin:tiny", "max_steps": 1, field: value}
    with TestClient(create_app(), base_url="http://localhost") as api:
        (refusal,) = api.post("/api/specs/check", json=spec).json()["problems"]
    said = refusal["message"]
    assert refusal["loc"] == loc and "resolves against GRPO_DATA_DIR" in said
    assert "GRPO_MODEL_ROOTS" in said and "restart it after changing it" in said
    with pytest.raises(OutsideRoots) as refused:  # as if the API had let it through
        train_silently("run-outside", JobSpec.model_validate(spec))
    assert user_message(refused.value) == said  # what the failed run's error reads
