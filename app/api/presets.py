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
    max_steps=300,
    prompts_per_step=32,
    num_generations=8,
    max_completion_length=6,
    learning_rate=3e-4,
    beta=0.04,
    save_steps=50,
    seed=0,
)
"""The demo of examples/arith-demo.yaml (a unit test keeps the two equal)."""

PRESETS = [
    Preset(
        name="arith-demo",
        title="Arithmetic demo (built-in tiny model, CPU, under a minute)",
        description="GRPO on two-operand arithmetic with an accuracy reward, from a model "
        "warmed up to about 37% exact: watch the reward rise (about 0.36 to 0.57 over 300 "
        "steps) and groups turn from mixed to all-pass.",
        spec=DEMO_SPEC.model_dump(mode="json", exclude_defaults=True),
    ),
]


@router.get("/presets")
def list_presets() -> PresetList:
    return PresetList(items=PRESETS)
