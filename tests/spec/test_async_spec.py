"""The asynchronous GRPO fields of a spec (grpo/spec/asynchrony.py): TRL AsyncGRPOConfig's
names and defaults, and the combinations async_generation refuses at submit, each a 422
naming the field and saying why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.main import create_app
from grpo.spec import JobSpec
from grpo.spec.hints import worded_errors
from tests.store_fixture import store

__all__ = ["store"]

ASYNC = {"model": "builtin:tiny", "async_generation": True}


def test_defaults_are_trls_and_async_is_off() -> None:
    spec = JobSpec()
    assert (spec.async_generation, spec.max_staleness, spec.weight_sync_steps) == (False, 4, 1)
    assert JobSpec(**ASYNC).max_staleness == 4  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "loc", "why"),
    [
        ({"use_vllm": True}, "vllm_mode", "colocated engine shares the trainer's process"),
        ({"resources": {"num_processes": 2}}, "resources.num_processes", "one trainer process"),
        ({"tools": [{"name": "python", "function": "f"}]}, "tools", "multi-turn"),
        ({"dynamic_sampling": {"enabled": True}}, "dynamic_sampling.enabled", "extra rounds"),
        ({"eval": {"holdout_fraction": 0.1}}, "eval", "held-out evaluation"),
        ({"weight_sync_steps": 3, "max_staleness": 1}, "max_staleness", "at least"),
    ],
)
def test_what_async_refuses_names_the_field(fields: dict[str, object], loc: str, why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate({**ASYNC, **fields})
    [row] = worded_errors(refused.value.errors(), JobSpec)  # what a 422 lists
    assert row["loc"] == loc
    assert why in row["message"]


def test_what_async_takes() -> None:
    JobSpec.model_validate({**ASYNC, "max_staleness": 0})
    JobSpec.model_validate({**ASYNC, "weight_sync_steps": 3, "max_staleness": 2})
    JobSpec.model_validate({**ASYNC, "use_vllm": True, "vllm_mode": "server"})
    # the refusals are async's: a synchronous run keeps every combination
    JobSpec.model_validate({"model": "builtin:tiny", "dynamic_sampling": {"enabled": True}})


def test_weight_sync_steps_without_a_copy_of_the_weights_is_a_note() -> None:
    spec = JobSpec(model="builtin:tiny", weight_sync_steps=2)
    assert any("weight_sync_steps has no effect" in note for note in spec.notes)
    assert JobSpec(model="builtin:tiny", use_vllm=True, weight_sync_steps=2).notes == []


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def test_submit_refuses_with_a_422_at_the_field(api: TestClient) -> None:
    body = {**ASYNC, "max_steps": 2, "dynamic_sampling": {"enabled": True}}
    refused = api.post("/api/runs", json=body)
    assert refused.status_code == 422, refused.text
    [field] = refused.json()["error"]["fields"]
    assert field["loc"] == "dynamic_sampling.enabled"
    assert field["message"].startswith("async_generation does not support this yet")
    assert api.get("/api/runs").json()["items"] == []
