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
    assert spec.epsilon_high is None  # grpo_loss reads None as epsilon
    assert spec.completions_per_step == 64


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
        ({"micro_batch_size": 0}, "micro_batch_size"),
        ({"num_generations": 8, "generation_batch_size": 12}, "generation_batch_size"),
        ({"generation_batch_size": 0}, "generation_batch_size"),
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


def test_batching_knobs_default_to_all_at_once_and_take_whole_groups() -> None:
    assert (JobSpec().micro_batch_size, JobSpec().generation_batch_size) == (None, None)
    spec = JobSpec(num_generations=8, micro_batch_size=5, generation_batch_size=24)
    assert (spec.micro_batch_size, spec.generation_batch_size) == (5, 24)
    with pytest.raises(ValidationError, match=r"multiple of num_generations \(8\)"):
        JobSpec(num_generations=8, generation_batch_size=12)


def test_spec_is_frozen() -> None:
    with pytest.raises(ValidationError):
        JobSpec().beta = 1.0  # type: ignore[misc]


def test_openapi_examples_are_valid_specs() -> None:
    for example in JobSpec.model_json_schema()["examples"]:
        JobSpec.model_validate(example)


def test_json_round_trip_keeps_the_spec() -> None:
    spec = JobSpec(rewards=[{"name": "accuracy"}, {"name": "format", "weight": 0.5}], lora={"r": 4})
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"delta": 1.2}, r"delta\n.*delta must exceed 1 \+ epsilon_high = 1.2"),
        ({"delta": 1.25, "epsilon_high": 0.28}, r"delta must exceed 1 \+ epsilon_high = 1.28"),
        ({"loss_type": "cispo"}, r"loss_type\n.*epsilon_high >= 1"),
        ({"sync_ref_model": True, "lora": {}, "ref_model_mixup_alpha": 0.5}, "mixup_alpha"),
        ({"sync_ref_every": 2, "sync_ref_model": True}, "sync_ref_every is replaced"),
        ({"sync_ref_every": -1}, "sync_ref_every must be an integer"),
    ],
)
def test_inconsistent_algorithm_knobs_are_rejected_with_the_field_named(data, message):
    with pytest.raises(ValidationError, match=message):
        JobSpec.model_validate(data)


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"delta": 1.0}, "delta"),
        ({"importance_sampling_level": "group"}, "importance_sampling_level"),
        ({"top_entropy_quantile": 1.5}, "top_entropy_quantile"),
        ({"multi_objective_aggregation": "max"}, "multi_objective_aggregation"),
        ({"ref_model_mixup_alpha": 2}, "ref_model_mixup_alpha"),
        ({"min_p": 1.5}, "min_p"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
        ({"stop": [""]}, "stop.0"),
        ({"dynamic_sampling": {"max_rounds": 0}}, "dynamic_sampling.max_rounds"),
    ],
)
def test_new_algorithm_knobs_are_bounded(data, loc):
    assert any(found.startswith(loc) for found in error_locs(data)), error_locs(data)


def test_stored_specs_with_sync_ref_every_load_as_trl_reference_sync():
    stored = JobSpec().model_dump(mode="json") | {"sync_ref_every": 5}
    del stored["sync_ref_model"], stored["ref_model_sync_steps"], stored["ref_model_mixup_alpha"]
    spec = JobSpec.model_validate(stored)
    assert (spec.sync_ref_model, spec.ref_model_sync_steps, spec.ref_model_mixup_alpha) == (
        True,
        5,
        1.0,
    )
    assert not JobSpec.model_validate({"sync_ref_every": 0}).sync_ref_model
    assert "sync_ref_every" not in JobSpec.model_json_schema()["properties"]


def test_gspo_with_a_token_summing_loss_is_legal_but_noted():
    assert JobSpec(importance_sampling_level="sequence").notes == []
    notes = JobSpec(importance_sampling_level="sequence", loss_type="dapo").notes
    assert notes and "GSPO intends grpo" in notes[0]
    assert JobSpec(loss_type="cispo", epsilon_high=5.0, delta=None).loss_type == "cispo"


def test_ranks_must_not_outnumber_the_groups_of_a_step() -> None:
    assert JobSpec(prompts_per_step=2, resources={"num_processes": 2}).resources.num_processes == 2
    with pytest.raises(
        ValidationError, match=r"num_processes \(3\) must be at most prompts_per_step \(2\)"
    ) as info:
        JobSpec(prompts_per_step=2, resources={"num_processes": 3})
    assert info.value.errors()[0]["loc"] == ("resources",)
    assert error_locs({"resources": {"num_processes": 0}}) == ["resources.num_processes"]


def test_fsdp_with_lora_or_eval_is_refused_with_a_reason() -> None:
    assert JobSpec(resources={"sharding": "fsdp"}).resources.sharding == "fsdp"
    with pytest.raises(ValidationError, match="sharding fsdp is for full fine-tuning"):
        JobSpec(resources={"sharding": "fsdp"}, lora={"r": 4})
    with pytest.raises(ValidationError, match="eval with resources.sharding fsdp"):
        JobSpec(resources={"sharding": "fsdp"}, eval={"every_steps": 1})
    assert JobSpec(resources={"num_processes": 2}, dynamic_sampling={"enabled": True})
    assert error_locs({"resources": {"sharding": "zero3"}}) == ["resources.sharding"]
