"""What a JobSpec trains: the model, its prompts and rewards, and how many of them a step
takes. Pydantic only, imports without torch; grpo/spec/ composes these fields into JobSpec."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from grpo.spec.config import SECTION_CONFIG, SpecInt
from grpo.spec.data import DataSpec
from grpo.spec.rewards import AccuracyReward, RewardSpec, check_reward_entries
from grpo.spec.sources import parse_model_name

BUILTIN_MODELS = (
    "builtin:tiny",
    "builtin:tiny-arith",
    "builtin:tiny-tools",
    "builtin:small",
    "builtin:small-arith",
)


class TaskKnobs(BaseModel):
    """The model, data and rewards of a job, and the shape of each step."""

    model_config = SECTION_CONFIG
    name: str | None = Field(None, max_length=200)
    """Human-readable run name."""
    model: str = Field("builtin:tiny-arith", min_length=1, max_length=500)
    """`builtin:tiny`, `builtin:tiny-arith`, `builtin:tiny-tools` (calls a calculator),
    `builtin:small` (a 32k-BPE Qwen2, random), `builtin:small-arith` (builtin:small
    warmed up on the arithmetic task in its chat template), a
    Hugging Face model id (`org/name` or `hf:org/name`) or a local directory (`/abs`,
    `./rel`, `~/dir` or `file:<path>`)."""
    data: DataSpec = DataSpec()
    """Prompt source."""
    rewards: tuple[RewardSpec, ...] = (AccuracyReward(),)
    """Reward functions; a completion's total reward is the weighted sum of the ones that
    apply to it (a function returns null where it does not)."""

    max_steps: SpecInt = Field(50, ge=1, le=1_000_000)
    """Number of GRPO steps (one generation batch each)."""
    prompts_per_step: SpecInt = Field(8, ge=1, le=4096)
    """Prompts (groups) per step, B."""
    num_generations: SpecInt = Field(8, ge=2, le=512)
    """Completions per prompt (G); advantages are relative within a group."""
    num_iterations: SpecInt = Field(1, ge=1, le=64)
    """Updates per generation batch (mu); >1 clips against the sampling policy."""

    @field_validator("rewards")
    @classmethod
    def _rewards_unique_and_valid(cls, rewards: tuple[RewardSpec, ...]) -> tuple[RewardSpec, ...]:
        return check_reward_entries(rewards)

    @field_validator("model")
    @classmethod
    def _model_known(cls, value: str) -> str:
        if value.startswith("builtin:") and value not in BUILTIN_MODELS:
            raise ValueError(f"unknown built-in model {value!r}; choose one of {BUILTIN_MODELS}")
        parse_model_name(value)
        return value
