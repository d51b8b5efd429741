"""The off-policy correction is the `importance_correction` section, which names no engine
(grpo/spec/correction.py): TRL's flat vllm_importance_sampling_* names, in a stored spec,
a spec file or a TRL recipe, load into it with the same values and defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from grpo.spec import JobSpec
from grpo.spec.trl_config import convert

BASE = {"model": "builtin:tiny-arith"}


def test_defaults_are_trls() -> None:
    correction = JobSpec.model_validate(BASE).importance_correction
    assert correction.enabled and correction.mode == "sequence_mask"
    assert correction.clip_max == 3.0 and correction.clip_min is None


def test_old_specs_flat_fields_load_into_the_section() -> None:
    old = {
        **BASE,
        "vllm_importance_sampling_correction": False,
        "vllm_importance_sampling_mode": "token_truncate",
        "vllm_importance_sampling_clip_max": 2.0,
        "vllm_importance_sampling_clip_min": 0.5,
    }
    spec = JobSpec.model_validate(old)
    assert spec.importance_correction.model_dump() == {
        "enabled": False, "mode": "token_truncate", "clip_max": 2.0, "clip_min": 0.5,
    }  # fmt: skip
    dumped = spec.model_dump(mode="json")
    assert not any(key.startswith("vllm_importance_sampling") for key in dumped)
    assert JobSpec.model_validate(dumped) == spec  # the stored form reads back the same


def test_flat_fields_merge_with_the_section_and_refuse_a_field_given_twice() -> None:
    both = {**BASE, "importance_correction": {"mode": "token_mask"},
            "vllm_importance_sampling_clip_max": 5.0}  # fmt: skip
    correction = JobSpec.model_validate(both).importance_correction
    assert (correction.mode, correction.clip_max) == ("token_mask", 5.0)
    twice = {**BASE, "importance_correction": {"mode": "token_mask"},
             "vllm_importance_sampling_mode": "token_truncate"}  # fmt: skip
    with pytest.raises(ValidationError, match="vllm_importance_sampling_mode is "
                       "importance_correction.mode: give it once"):  # fmt: skip
        JobSpec.model_validate(twice)


def test_the_section_checks_its_bounds() -> None:
    with pytest.raises(ValidationError, match="must be below clip_max"):
        JobSpec.model_validate({**BASE, "importance_correction": {"clip_min": 4.0}})
    with pytest.raises(ValidationError, match="must be below clip_max"):
        JobSpec.model_validate({**BASE, "vllm_importance_sampling_clip_min": 4.0})
    with pytest.raises(ValidationError):
        JobSpec.model_validate({**BASE, "importance_correction": {"mode": "vllm"}})


def test_trl_recipes_names_map_onto_the_section() -> None:
    out = convert({"vllm_importance_sampling_correction": False,
                   "vllm_importance_sampling_mode": "sequence_truncate"})  # fmt: skip
    assert out.spec["importance_correction"] == {"enabled": False, "mode": "sequence_truncate"}
    assert not any(key.startswith("vllm_importance") for key in out.unmapped)


def test_the_schema_holds_the_section_and_no_flat_name() -> None:
    properties = JobSpec.model_json_schema()["properties"]
    assert "importance_correction" in properties
    assert not any(key.startswith("vllm_importance_sampling") for key in properties)
