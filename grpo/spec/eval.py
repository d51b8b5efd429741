"""The `eval` section of a JobSpec: held-out prompts scored during training. Pydantic only,
imports without torch."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from grpo.spec.config import SpecInt
from grpo.spec.data import checked_data_source
from grpo.spec.rewards import RewardSpec, check_reward_entries


class EvalSpec(BaseModel):
    """Held-out evaluation at step 0, every `every_steps` and at the end (grpo/eval/heldout.py).

    Reward gains that do not transfer to held-out prompts are the signature of reward
    hacking; this measures the transfer on the run's device, batched like training."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    source: str | None = Field(None, min_length=1, max_length=500)
    """Data source as in `data.source`; None: the run's own source (its `split`, or the
    share `holdout_fraction` keeps out of training). An uploaded dataset or a local file
    has a single split: give it another source here, or a holdout_fraction."""
    holdout_fraction: float | None = Field(None, gt=0.0, lt=1.0)
    """Keep this share of the training source's examples out of training and evaluate on
    them: a split seeded by the run's `seed`, never overlapping (grpo/data/holdout.py);
    None: no split. For a source with one split (an upload, a local file); not with
    `source`. TRL has no such knob (its eval_dataset is given whole)."""
    split: str = Field("test", pattern=r"^[A-Za-z0-9_.\-\[\]:%]+$")
    """Split to evaluate on."""
    prompt_field: str | None = Field(None, min_length=1, max_length=100)
    """None: the run's `data.prompt_field`."""
    answer_field: str | None = Field(None, min_length=1, max_length=100)
    """None: the run's `data.answer_field`."""
    every_steps: SpecInt = Field(50, ge=0, le=1_000_000)
    """Evaluate after every k-th step (and at step 0 and the end); 0: only at 0 and the end."""
    max_examples: SpecInt = Field(200, ge=1, le=100_000)
    """The first this many examples of the split."""
    num_samples: SpecInt = Field(1, ge=1, le=64)
    """Completions per example; k of pass@k."""
    temperature: float = Field(0.0, ge=0.0, le=10.0)
    """0: greedy decoding."""
    rewards: tuple[RewardSpec, ...] | None = None
    """Reward functions that score the eval samples (and decide a pass, as in training);
    None: the run's own."""

    @field_validator("source")
    @classmethod
    def _source_known(cls, value: str | None) -> str | None:
        return None if value is None else checked_data_source(value)

    @field_validator("rewards")
    @classmethod
    def _rewards_valid(
        cls, rewards: tuple[RewardSpec, ...] | None
    ) -> tuple[RewardSpec, ...] | None:
        return None if rewards is None else check_reward_entries(rewards)

    @model_validator(mode="after")
    def _samples_differ(self) -> EvalSpec:
        if self.source is not None and self.holdout_fraction is not None:
            raise ValueError(
                "holdout_fraction keeps a share of the training source for eval; with "
                "eval.source set, leave it out"
            )
        if self.num_samples > 1 and self.temperature == 0:
            raise ValueError("num_samples > 1 needs temperature > 0 (greedy samples are equal)")
        return self
