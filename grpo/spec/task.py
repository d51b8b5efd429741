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
FIRST_USE_BUILD = {
    "builtin:tiny": "about a second",
    "builtin:tiny-arith": "about 1 min",
    "builtin:tiny-tools": "6-7 min",
    "builtin:small": "about 5 s",
    "builtin:small-arith": "about 4 min",
}
"""How long each built-in takes to build on its first use on a machine (once: it is kept in
the cache directory), on this project's busy 2-core VM: the random bases are written in
seconds (builtin:small trains its BPE tokenizer), the others are warmed up on one CPU
thread (grpo/models/warmup.py, tool_warmup.py). The build's log lines and the docs say it."""
RANDOM_WEIGHTS = {"builtin:tiny": "builtin:tiny-arith", "builtin:small": "builtin:small-arith"}
"""The built-ins with random weights, each with its trained sibling: a run on one cannot
learn a task (its completions are noise, every group fails alike), so the spec check warns."""


def model_warnings(model: str) -> list[str]:
    """What submit accepts but a run on `model` will not do: learn (a random built-in)."""
    trained = RANDOM_WEIGHTS.get(model)
    if trained is None:
        return []
    return [
        f"{model} has random weights: a run on it cannot learn; use {trained} (trained; "
        f"first use builds it, {FIRST_USE_BUILD[trained]}). {model} is for testing the plumbing"
    ]


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
    reward_preflight_records: SpecInt = Field(3, ge=0, le=8)
    """Records whose adversarial completions (empty, the format around a wrong answer, the
    prompt echoed, ...: docs/how-to/check-a-reward.md) the run's rewards score at its start,
    before the first step, within 30 s: each one a function pays as well as a correct
    completion, or fails on, is a run-doctor finding and a warning in the run's log.
    0: none (a judge is called about ten times a record). Not run with `tools`."""

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
