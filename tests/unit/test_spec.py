"""JobSpec: every bad spec is rejected with the field's path; good ones fill in defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from grpo.spec import JobSpec


def error_locs(data: dict[str, object]) -> list[str]:
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate(data)
    return [".".join(str(p) for p in e["loc"]) for e in info.value.errors()]


def test_defaults_are_trl_like_and_derived_values_are_properties() -> None:
    spec = JobSpec()
    assert (spec.num_generations, spec.beta, spec.epsilon, spec.loss_type) == (8, 0.04, 0.2, "grpo")
    assert spec.effective_epsilon_high == 0.2
    assert spec.completions_per_step == 64
    assert JobSpec(epsilon_high=0.28).effective_epsilon_high == 0.28


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"unknown_knob": 1}, "unknown_knob"),
        ({"num_generations": 1}, "num_generations"),
        ({"beta": -0.1}, "beta"),
        ({"learning_rate": float("inf")}, "learning_rate"),
        ({"temperature": float("nan")}, "temperature"),
        ({"loss_type": "ppo"}, "loss_type"),
        ({"scale_rewards": "mad"}, "scale_rewards"),
        ({"epsilon": 0.3, "epsilon_high": 0.2}, "epsilon_high"),
        ({"beta": 0.0, "kl_target": 0.05}, "kl_target"),
        ({"model": "builtin:huge"}, "model"),
        ({"data": {"source": "builtin:chess"}}, "data.source"),
        ({"data": {"prompt_template": "no placeholder"}}, "data.prompt_template"),
        ({"rewards": []}, "rewards"),
        ({"rewards": [{"name": "accuracy"}, {"name": "accuracy"}]}, "rewards"),
        ({"rewards": [{"name": "regex", "pattern": "(unclosed"}]}, "rewards"),
        ({"rewards": [{"name": "mind_reading"}]}, "rewards.0"),
        ({"device": "tpu"}, "device"),
        ({"resources": {"queue": "../../etc"}}, "resources.queue"),
    ],
)
def test_bad_specs_name_the_field(data: dict[str, object], loc: str) -> None:
    assert any(found.startswith(loc) for found in error_locs(data)), error_locs(data)


def test_spec_is_frozen() -> None:
    with pytest.raises(ValidationError):
        JobSpec().beta = 1.0  # type: ignore[misc]


def test_openapi_examples_are_valid_specs() -> None:
    for example in JobSpec.model_json_schema()["examples"]:
        JobSpec.model_validate(example)


def test_json_round_trip_keeps_the_spec() -> None:
    spec = JobSpec(rewards=[{"name": "accuracy"}, {"name": "format", "weight": 0.5}], lora={"r": 4})
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec
