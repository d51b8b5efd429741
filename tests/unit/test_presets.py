"""The demo the dashboard offers is the one examples/arith-demo.yaml documents."""

from __future__ import annotations

from pathlib import Path

import yaml

from app.api.presets import DEMO_SPEC
from grpo.spec import JobSpec

ROOT = Path(__file__).resolve().parents[2]


def test_dashboard_demo_equals_the_example_file() -> None:
    from_file = JobSpec.model_validate(
        yaml.safe_load((ROOT / "examples/arith-demo.yaml").read_text())
    )
    assert from_file == DEMO_SPEC
