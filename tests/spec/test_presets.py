"""The demo the dashboard offers is the one examples/arith-demo.yaml documents."""

from __future__ import annotations

from pathlib import Path

import yaml

from app.api.routes.presets import DEMO_SPEC
from grpo.spec import JobSpec

ROOT = Path(__file__).resolve().parents[2]


def test_dashboard_demo_equals_the_example_file() -> None:
    from_file = JobSpec.model_validate(
        yaml.safe_load((ROOT / "examples/arith-demo.yaml").read_text())
    )
    assert from_file == DEMO_SPEC


def test_every_preset_is_a_valid_spec_and_the_recipes_set_their_papers_knobs() -> None:
    from app.api.routes.presets import PRESETS

    specs = {p.name: JobSpec.model_validate(p.spec) for p in PRESETS}
    assert list(specs)[0] == "arith-demo"
    assert specs["dr-grpo"].loss_type == "dr_grpo" and specs["dr-grpo"].scale_rewards == "none"
    dapo = specs["dapo"]
    assert (dapo.loss_type, dapo.epsilon_high) == ("dapo", 0.28)
    assert dapo.dynamic_sampling.enabled and [r.name for r in dapo.rewards] == [
        "accuracy",
        "length",
    ]
    gspo = specs["gspo"]
    assert (gspo.importance_sampling_level, gspo.loss_type, gspo.epsilon) == (
        "sequence",
        "grpo",
        3e-4,
    )
    assert not gspo.notes
    assert specs["deepseekmath-grpo"].beta == 0.04
    assert all(p.title and "\n" not in p.title for p in PRESETS)
