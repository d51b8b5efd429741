"""The GRPO algorithm's knobs of a JobSpec: KL toward the reference, clipping, how the loss
is formed and averaged, advantages and DAPO's dynamic sampling. Pydantic only, imports
without torch; grpo/spec/ composes these fields into JobSpec, grpo/algo/loss.py and
grpo/algo/advantages.py do the math they name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from grpo.spec.config import SECTION_CONFIG, SpecInt


@dataclass(frozen=True)
class LossRecipe:
    """What one `loss_type` is made of, as verl splits it: a per-token objective and an
    aggregation of the step's per-token losses (verl's loss_agg_mode), each named here and
    computed by the function of that name in grpo/algo/loss.py (OBJECTIVES, AGGREGATIONS)."""

    objective: str
    """`clipped` (PPO's clipped surrogate, DeepSeekMath eq. 3) or `cispo` (the capped,
    detached importance weight times log-prob, MiniMax-M1, arXiv:2506.13585)."""
    aggregation: str
    """`sequence_mean`: each sequence's token mean, summed, over the step's N sequences
    (DeepSeekMath; verl's seq-mean-token-mean); `token_mean`: every token's loss over the
    step's token count (DAPO; verl's token-mean); `constant_length`: over N times
    max_completion_length, a constant, so no length bias (Dr. GRPO; verl's
    seq-mean-token-sum-norm)."""


LOSS_TYPES: dict[str, LossRecipe] = {
    "grpo": LossRecipe("clipped", "sequence_mean"),
    "bnpo": LossRecipe("clipped", "token_mean"),
    "dr_grpo": LossRecipe("clipped", "constant_length"),
    "dapo": LossRecipe("clipped", "token_mean"),
    "cispo": LossRecipe("cispo", "token_mean"),
}
"""Every `loss_type`, by TRL's name: the one list of them (the spec's Literal below is read
from its keys). A new one that reuses an objective and an aggregation is one entry here."""

if TYPE_CHECKING:
    LossTypeName = str
else:
    LossTypeName = Literal[tuple(LOSS_TYPES)]


class DynamicSamplingSpec(BaseModel):
    """DAPO's dynamic sampling (Yu et al. 2025, arXiv:2503.14476): drop groups whose rewards
    are all equal (zero advantage, no gradient) and sample more prompts until the step has
    prompts_per_step groups with signal or the rounds run out."""

    model_config = SECTION_CONFIG
    enabled: bool = False
    """Drop zero-signal groups and refill the step with newly sampled prompts."""
    max_rounds: SpecInt = Field(3, ge=1, le=64)
    """Generation rounds per step at most, the first included; then the step trains on what
    it has."""


class AlgorithmKnobs(BaseModel):
    """KL, clipping, loss and advantage knobs; TRL's GRPOConfig names."""

    model_config = SECTION_CONFIG
    beta: float = Field(0.04, ge=0, le=100)
    """KL coefficient toward the reference policy (0 skips the reference pass)."""
    kl_target: float | None = Field(None, gt=0)
    """When set, beta adapts each step toward this KL (adaptive controller)."""
    kl_horizon: SpecInt = Field(100, ge=1, le=10**9)
    """Steps over which the adaptive controller closes the gap to kl_target."""
    sync_ref_model: bool = False
    """Update the reference from the policy every ref_model_sync_steps steps (TR-DPO,
    Gorbatovski et al. 2024, arXiv:2404.09656); replaces `sync_ref_every`."""
    ref_model_sync_steps: SpecInt = Field(512, ge=1, le=10**9)
    """Steps between reference updates (TR-DPO's tau)."""
    ref_model_mixup_alpha: float = Field(0.6, ge=0, le=1)
    """ref <- alpha * policy + (1 - alpha) * ref at each update; 1 copies the policy."""
    epsilon: float = Field(0.2, gt=0, lt=1)
    """Lower clip range: ratio is clipped below at 1 - epsilon."""
    epsilon_high: float | None = Field(None, gt=0, le=10)
    """Upper clip range (DAPO clip-higher); None means epsilon."""
    delta: float | None = Field(None, gt=1, le=100)
    """Two-sided clipping (INTELLECT-2, arXiv:2505.07291): the unclipped ratio is capped at
    delta, bounding negative-advantage updates too; must exceed 1 + epsilon_high."""
    loss_type: LossTypeName = "grpo"
    """How per-token losses are formed and averaged; see grpo/algo/loss.py. `cispo` (MiniMax-M1)
    weights log-probs by the importance ratio capped at epsilon_high (not 1 + epsilon_high)."""
    importance_sampling_level: Literal["token", "sequence"] = "token"
    """One ratio per token, or one per sequence: exp of the mean log-ratio over its tokens
    (GSPO, Zheng et al. 2025, arXiv:2507.18071)."""
    top_entropy_quantile: float = Field(1.0, ge=0, le=1)
    """Only the top-rho share of the step's tokens by entropy enter the policy loss (Beyond
    the 80/20 Rule, arXiv:2506.01939, recommends 0.2); 1 keeps all."""
    entropy_coef: float = Field(0.0, ge=0, le=10)
    """Entropy bonus: loss -= coef * mean token entropy of the tokens in the policy loss."""
    multi_objective_aggregation: Literal["sum_then_normalize", "normalize_then_sum"] = (
        "sum_then_normalize"
    )
    """Weighted sum of rewards, then advantages; or each function normalised within its group
    first (GDPO, arXiv:2601.05242); see grpo/algo/advantages.py."""
    dynamic_sampling: DynamicSamplingSpec = DynamicSamplingSpec()
    """Drop all-equal-reward groups and sample more (DAPO)."""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    """Std that divides centred rewards: per group, whole batch, or none (Dr. GRPO)."""
    advantage_eps: float = Field(1e-8, gt=0, le=1)
    """Added to the std so all-equal groups get advantage 0."""
    advantage_clip: float | None = Field(None, gt=0)
    """When set, advantages are clipped to [-c, c]."""
    mask_truncated_completions: bool = False
    """Exclude completions that hit max_completion_length from the loss."""

    @field_validator("epsilon_high")
    @classmethod
    def _clip_range_ordered(cls, value: float | None, info: ValidationInfo) -> float | None:
        epsilon = info.data.get("epsilon")
        if value is not None and epsilon is not None and value < epsilon:
            raise ValueError(f"must be >= epsilon ({epsilon})")
        return value

    @field_validator("kl_target")
    @classmethod
    def _controller_needs_beta(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("beta") == 0:
            raise ValueError("needs beta > 0 (the controller scales beta)")
        return value

    @field_validator("delta")
    @classmethod
    def _delta_above_clip(cls, value: float | None, info: ValidationInfo) -> float | None:
        eps_high = info.data.get("epsilon_high") or info.data.get("epsilon")
        if value is not None and eps_high is not None and value <= 1 + eps_high:
            raise ValueError(f"delta must exceed 1 + epsilon_high = {1 + eps_high:g}")
        return value

    @field_validator("loss_type")
    @classmethod
    def _cispo_cap_set(cls, value: str, info: ValidationInfo) -> str:
        eps_high = info.data.get("epsilon_high")
        if LOSS_TYPES[value].objective == "cispo" and (eps_high is None or eps_high < 1):
            raise ValueError(
                "cispo caps the importance weight at epsilon_high itself: set epsilon_high "
                ">= 1 (MiniMax-M1 / ScaleRL use about 5)"
            )
        return value
