"""Presets: ready-made specs the new-run page offers, the built-in demo first. A read like
any other: with GRPO_READ_REQUIRES_TOKEN it needs the token (the dashboard sends it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.deps import ReadAccess
from app.api.schemas import Preset, PresetList
from grpo.spec import AccuracyReward, JobSpec
from grpo.spec.demo import DEMO_PROMISE, DEMO_TIME

router = APIRouter(prefix="/api", tags=["presets"], dependencies=[ReadAccess])

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
    precision="fp32",
    save_steps=50,
    seed=0,
)
"""The demo of examples/arith-demo.yaml (a unit test keeps the two equal)."""


RECIPES: list[tuple[str, str, dict[str, Any]]] = [
    # DeepSeekMath (Shao et al. 2024, arXiv:2402.03300): the original GRPO objective
    (
        "deepseekmath-grpo",
        "DeepSeekMath GRPO: per-sequence mean, group std, KL 0.04",
        {"loss_type": "grpo", "scale_rewards": "group", "beta": 0.04, "epsilon": 0.2},
    ),
    # Dr. GRPO (Liu et al. 2025, arXiv:2503.20783): no length or difficulty bias
    (
        "dr-grpo",
        "Dr. GRPO: constant normaliser, no std, no KL",
        {"loss_type": "dr_grpo", "scale_rewards": "none", "beta": 0.0},
    ),
    # DAPO (Yu et al. 2025, arXiv:2503.14476)
    (
        "dapo",
        "DAPO: clip-higher, dynamic sampling, token-level loss, overlong penalty",
        {
            "loss_type": "dapo",
            "beta": 0.0,
            "epsilon": 0.2,
            "epsilon_high": 0.28,
            "dynamic_sampling": {"enabled": True, "max_rounds": 3},
            "rewards": [
                {"name": "accuracy"},
                {"name": "length", "max_length": 6, "cache_length": 2},
            ],
        },
    ),
    # GSPO (Zheng et al. 2025, arXiv:2507.18071): its clip ranges; two updates per batch so
    # the sequence ratio moves off 1 and the clip can act
    (
        "gspo",
        "GSPO: sequence-level importance ratios, tight clip",
        {
            "importance_sampling_level": "sequence",
            "loss_type": "grpo",
            "beta": 0.0,
            "epsilon": 3e-4,
            "epsilon_high": 4e-4,
            "num_iterations": 2,
        },
    ),
]
"""Published recipes on the demo task and model: (name, one-line title, knobs). The docs'
how-to/recipes.md has a paragraph and the paper for each."""

PRESETS = [
    Preset(
        name="arith-demo",
        title=f"Arithmetic demo (built-in tiny model, {DEMO_TIME})",
        description="GRPO on two-operand arithmetic with an accuracy reward, from a model "
        f"warmed up to about 37% exact: watch the reward rise ({DEMO_PROMISE}, the mean of "
        "the first and of the last 10) and groups turn from mixed to all-pass.",
        spec=DEMO_SPEC.model_dump(mode="json", exclude_defaults=True),
    ),
    *[
        Preset(
            name=name,
            title=title,
            description="",
            spec=DEMO_SPEC.model_dump(mode="json", exclude_defaults=True) | {"name": name} | knobs,
        )
        for name, title, knobs in RECIPES
    ],
]


@router.get("/presets")
def list_presets() -> PresetList:
    return PresetList(items=PRESETS)
