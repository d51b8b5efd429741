"""The off-policy correction: the `importance_correction` section of a JobSpec.

Whatever sampled a rollout (a vLLM engine, whose kernels differ from the trainer's; an
asynchronous run's producer, on weights up to max_staleness versions older), the loss may
weigh each token's policy term by a bounded importance ratio pi_trainer / pi_sampler. The
section names no engine: grpo/training/step_loss.py reads it whenever a rollout carries
its sampler's log-probs. TRL's GRPOConfig names its knobs `vllm_importance_sampling_*`;
they map onto this section (`TRL_NAMES`: grpo/spec/trl_config.py for recipes,
grpo/spec/legacy.py for specs stored or written with those names). Pydantic only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from grpo.spec.config import SECTION_CONFIG

ImportanceSamplingMode = Literal[
    "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"
]
TRL_NAMES = {
    "vllm_importance_sampling_correction": "enabled",
    "vllm_importance_sampling_mode": "mode",
    "vllm_importance_sampling_clip_max": "clip_max",
    "vllm_importance_sampling_clip_min": "clip_min",
}
"""TRL GRPOConfig's flat names -> this section's fields (same values, same defaults)."""


class ImportanceCorrectionSpec(BaseModel):
    """Truncated importance sampling of the gap between the sampler's log-probs and the
    trainer's recomputed ones (Yao et al. 2025, "Your efficient RL framework secretly brings
    you off-policy RL training", fengyao.notion.site/off-policy-rl). Applies to every
    rollout whose engine returns its sampling log-probs (vLLM, colocated or server; an
    asynchronous run's producer); TRL's vllm_importance_sampling_* knobs."""

    model_config = SECTION_CONFIG
    enabled: bool = True
    """Weigh each token's policy loss with the bounded ratio pi_trainer / pi_sampler. TRL's
    vllm_importance_sampling_correction and default."""
    mode: ImportanceSamplingMode = "sequence_mask"
    """How the ratio is formed and bounded: per token, or one ratio per sequence (exp of
    the summed token log-ratio); `truncate` clips it to [clip_min, clip_max], `mask` sets it
    to 0 outside (the token, or the whole sequence, leaves the policy loss). TRL's
    vllm_importance_sampling_mode and default."""
    clip_max: float | None = Field(3.0, gt=0, le=1e6)
    """C_max: the upper bound of the ratio (truncate clips to it, mask drops above it);
    None: no upper bound. TRL's vllm_importance_sampling_clip_max, default 3."""
    clip_min: float | None = Field(None, ge=0, le=1e6)
    """C_min: the lower bound (truncate clips to it, mask drops below it); None: none.
    TRL's vllm_importance_sampling_clip_min."""

    @field_validator("clip_min")
    @classmethod
    def _bounds_ordered(cls, value: float | None, info: ValidationInfo) -> float | None:
        upper = info.data.get("clip_max")
        if value is not None and upper is not None and value >= upper:
            raise ValueError(f"must be below clip_max ({upper})")
        return value


class CorrectionKnobs(BaseModel):
    """The off-policy correction of the gap between the sampler's log-probs and the
    trainer's, whatever engine sampled (TRL's vllm_importance_sampling_* knobs)."""

    model_config = SECTION_CONFIG
    importance_correction: ImportanceCorrectionSpec = ImportanceCorrectionSpec()
    """The off-policy correction of the sampler/trainer log-prob gap, whatever engine
    sampled (TRL's vllm_importance_sampling_* knobs)."""


def section_from_trl_names(data: dict[str, object]) -> dict[str, object]:
    """`data` with TRL's flat vllm_importance_sampling_* keys moved into an
    `importance_correction` section (merged with one already given: a field given both
    ways is refused, naming both)."""
    flat = {key: data[key] for key in TRL_NAMES if key in data}
    if not flat:
        return data
    data = {key: value for key, value in data.items() if key not in flat}
    section = data.get("importance_correction")
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ValueError("importance_correction must be a mapping")
    section = dict(section)
    for key, value in flat.items():
        ours = TRL_NAMES[key]
        if ours in section:
            raise ValueError(f"{key} is importance_correction.{ours}: give it once")
        section[ours] = value
    data["importance_correction"] = section
    return data
