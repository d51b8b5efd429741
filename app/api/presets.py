"""Presets: ready-made specs the new-run page offers, the built-in demo first."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.schemas import Preset, PresetList
from grpo.spec import AccuracyReward, JobSpec

router = APIRouter(prefix="/api", tags=["presets"])

DEMO_SPEC = JobSpec(
    name="arith-demo",
    model="builtin:tiny-arith",
    rewards=(AccuracyReward(),),
    max_steps=30,
    prompts_per_step=8,
    num_generations=8,
    max_completion_length=8,
    learning_rate=2e-4,
    beta=0.04,
    temperature=1.0,
    save_steps=10,
    seed=0,
)
"""The demo of examples/arith-demo.yaml (a unit test keeps the two equal)."""

PRESETS = [
    Preset(
        name="arith-demo",
        title="Arithmetic demo (built-in tiny model, CPU, ~2 min)",
        description="GRPO on two-operand arithmetic with an accuracy reward; "
        "watch reward rise and the groups turn from mixed to all-pass.",
        spec=DEMO_SPEC.model_dump(mode="json", exclude_defaults=True),
    ),
]


@router.get("/presets")
def list_presets() -> PresetList:
    return PresetList(items=PRESETS)
