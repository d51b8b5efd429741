"""JobSpec: the one description of a GRPO job.

The API validates request bodies with it, the store keeps it as JSON on the run, the
worker rebuilds the trainer from it and the CLI reads YAML into it. Pydantic only: this
module must import without torch. Knob names follow TRL's GRPOConfig where the concept is
the same. Knows nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from grpo.eval_spec import EvalSpec
from grpo.reward_spec import (
    DEFAULT_FORMAT_PATTERN,
    ENTRY_POINT_GROUP,
    AccuracyReward,
    CodeReward,
    ExactMatchReward,
    FormatReward,
    HttpReward,
    LengthReward,
    ModelReward,
    PythonReward,
    RegexReward,
    endpoint_host,
    is_allowed_host,
)
from grpo.sources import parse_data_source, parse_model_name
from grpo.spec_legacy import map_legacy_fields

# the reward entries live in reward_spec.py; they are also this module's names
__all__ = [
    "DEFAULT_FORMAT_PATTERN",
    "ENTRY_POINT_GROUP",
    "endpoint_host",
    "is_allowed_host",
    "AccuracyReward",
    "CodeReward",
    "ExactMatchReward",
    "FormatReward",
    "HttpReward",
    "LengthReward",
    "ModelReward",
    "PythonReward",
    "RegexReward",
    "RewardSpec",
    "DataSpec",
    "LoraSpec",
    "ResourcesSpec",
    "LoggingSpec",
    "JobSpec",
]

BUILTIN_MODELS = ("builtin:tiny", "builtin:tiny-arith", "builtin:small")
BUILTIN_TASKS = ("builtin:arith", "builtin:code")

_FROZEN = ConfigDict(
    extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
)


RewardSpec = Annotated[
    AccuracyReward
    | FormatReward
    | LengthReward
    | ExactMatchReward
    | RegexReward
    | PythonReward
    | HttpReward
    | ModelReward
    | CodeReward,
    Field(discriminator="name"),
]
"""One reward entry; `name` picks the kind (grpo/reward_spec.py documents each)."""

EvalSpec.model_rebuild(_types_namespace={"RewardSpec": RewardSpec})


def check_reward_entries(rewards: tuple[RewardSpec, ...]) -> tuple[RewardSpec, ...]:
    """At least one entry, unique labels, patterns that compile."""
    if not rewards:
        raise ValueError("at least one reward function is required")
    labels = [r.label for r in rewards]
    if len(set(labels)) != len(labels):
        raise ValueError(
            f"reward labels must be unique, got {labels}: give each entry its own `label`"
        )
    for r in rewards:
        if isinstance(r, FormatReward | RegexReward):
            try:
                re.compile(r.pattern)
            except re.error as exc:
                raise ValueError(f"{r.name}.pattern is not a valid regex: {exc}") from exc
    return rewards


class DataSpec(BaseModel):
    """Where prompts and reference answers come from."""

    model_config = _FROZEN
    source: str = Field("builtin:arith", min_length=1, max_length=500)
    """`builtin:arith`, `builtin:code`, `dataset:<id>` (uploaded), `hf:<name>[:<config>]` or a
    JSONL path (`file:<path>` or any other text); see grpo/sources.py."""
    split: str = Field("train", pattern=r"^[A-Za-z0-9_.\-\[\]:%]+$")
    """Split to train on."""
    prompt_field: str = Field("prompt", min_length=1, max_length=100)
    """Field of each record that holds the prompt."""
    answer_field: str = Field("answer", min_length=1, max_length=100)
    """Field of each record that holds the reference answer."""
    prompt_template: str = Field("{prompt}", max_length=4000)
    """Text around each prompt; `{prompt}` is replaced by the record's prompt."""
    use_chat_template: bool = True
    """Apply the tokenizer's chat template when it has one."""

    @field_validator("source")
    @classmethod
    def _builtin_known(cls, value: str) -> str:
        if value.startswith("builtin:") and value not in BUILTIN_TASKS:
            raise ValueError(f"unknown built-in task {value!r}; choose one of {BUILTIN_TASKS}")
        parse_data_source(value)
        return value

    @field_validator("prompt_template")
    @classmethod
    def _has_placeholder(cls, value: str) -> str:
        if "{prompt}" not in value:
            raise ValueError("must contain the placeholder {prompt}")
        return value


class LoraSpec(BaseModel):
    """Train LoRA adapters instead of all weights; the reference is the adapter-free model."""

    model_config = _FROZEN
    r: int = Field(8, ge=1, le=1024)
    """Rank of the adapters."""
    alpha: float = Field(16.0, gt=0)
    """Scaling numerator (scale = alpha / r)."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the adapter input (0 keeps log-probs deterministic)."""
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    """Names of the linear layers that get adapters."""


class ResourcesSpec(BaseModel):
    """Where the job runs."""

    model_config = _FROZEN
    queue: str = Field("default", pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    """Celery queue; workers started for a GPU class listen on its queue."""
    min_free_memory_gb: float | None = Field(None, gt=0, le=100_000)
    """Free memory (GiB) the job needs on its device; a worker with less leaves it queued."""
    num_processes: int = Field(1, ge=1, le=64)
    """Ranks of one run on one machine (torch.distributed data parallel): one per GPU on
    CUDA (NCCL), CPU processes with gloo otherwise. Whole groups are dealt to ranks, so
    prompts_per_step must be at least this; the update equals one process on the union."""
    sharding: Literal["ddp", "fsdp"] = "ddp"
    """ddp: every rank holds the whole model, gradients are all-reduced. fsdp (FSDP2
    `fully_shard`) is refused for now: see docs/scaling.md."""


TRACKER_PACKAGES = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}
"""The package each `logging.report_to` tracker needs (the `trackers` extra); the API checks
it is importable at submit, without importing it."""


class LoggingSpec(BaseModel):
    """What is kept of each step beyond its scalars."""

    model_config = _FROZEN
    max_groups_per_step: int = Field(16, ge=0, le=4096)
    """Groups per step whose completion texts are kept (all group stats are always kept)."""
    pass_threshold: float = Field(1.0, ge=-1e6, le=1e6)
    """Total reward at which a completion passes when no accuracy-like reward (`accuracy`,
    `exact_match`, `code`) decides: groups are all_pass, all_fail or mixed by it."""
    report_to: tuple[Literal["tensorboard", "mlflow", "wandb"], ...] = ()
    """Trackers that also get every step's scalars, histograms and eval metrics (our store
    stays the source of truth): `tensorboard` writes event files under the run's directory
    (`tensorboard/`); `mlflow` logs scalars and eval metrics to the operator's tracking URI
    (`GRPO_MLFLOW_URI`; default a SQLite store in the run's directory), histograms not;
    `wandb` logs all three to Weights & Biases as the worker's W&B is configured (online, or
    `WANDB_MODE=offline`), files under the run's directory (`wandb/`).
    TRL's `report_to` names. Needs the `trackers` extra. See grpo/trackers.py."""


class DynamicSamplingSpec(BaseModel):
    """DAPO's dynamic sampling (Yu et al. 2025, arXiv:2503.14476): drop groups whose rewards
    are all equal (zero advantage, no gradient) and sample more prompts until the step has
    prompts_per_step groups with signal or the rounds run out."""

    model_config = _FROZEN
    enabled: bool = False
    """Drop zero-signal groups and refill the step with newly sampled prompts."""
    max_rounds: int = Field(3, ge=1, le=64)
    """Generation rounds per step at most, the first included; then the step trains on what
    it has."""


class JobSpec(BaseModel):
    """A GRPO training job: model, data, rewards and every algorithm knob."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {"name": "arith-demo", "model": "builtin:tiny-arith", "max_steps": 30},
                {
                    "name": "r1-format",
                    "model": "Qwen/Qwen2.5-0.5B-Instruct",
                    "data": {"source": "dataset:0123456789abcdef"},
                    "rewards": [{"name": "accuracy"}, {"name": "format", "weight": 0.2}],
                    "num_generations": 16,
                    "max_completion_length": 512,
                    "beta": 0.0,
                    "loss_type": "dr_grpo",
                    "scale_rewards": "none",
                    "epsilon_high": 0.28,
                    "precision": "bf16",
                    "lora": {"r": 16},
                    "resources": {"queue": "h100"},
                },
            ]
        },
    )
    name: str | None = Field(None, max_length=200)
    """Human-readable run name."""
    model: str = Field("builtin:tiny-arith", min_length=1, max_length=500)
    """`builtin:tiny`, `builtin:tiny-arith`, `builtin:small` (a 32k-BPE Qwen2, random), a
    Hugging Face model id (`org/name` or `hf:org/name`) or a local directory (`/abs`,
    `./rel`, `~/dir` or `file:<path>`)."""
    data: DataSpec = DataSpec()
    """Prompt source."""
    rewards: tuple[RewardSpec, ...] = (AccuracyReward(),)
    """Reward functions; a completion's total reward is the weighted sum of the ones that
    apply to it (a function returns null where it does not)."""

    max_steps: int = Field(50, ge=1, le=1_000_000)
    """Number of GRPO steps (one generation batch each)."""
    prompts_per_step: int = Field(8, ge=1, le=4096)
    """Prompts (groups) per step, B."""
    num_generations: int = Field(8, ge=2, le=512)
    """Completions per prompt (G); advantages are relative within a group."""
    num_iterations: int = Field(1, ge=1, le=64)
    """Updates per generation batch (mu); >1 clips against the sampling policy."""

    beta: float = Field(0.04, ge=0, le=100)
    """KL coefficient toward the reference policy (0 skips the reference pass)."""
    kl_target: float | None = Field(None, gt=0)
    """When set, beta adapts each step toward this KL (adaptive controller)."""
    kl_horizon: int = Field(100, ge=1)
    """Steps over which the adaptive controller closes the gap to kl_target."""
    sync_ref_model: bool = False
    """Update the reference from the policy every ref_model_sync_steps steps (TR-DPO,
    Gorbatovski et al. 2024, arXiv:2404.09656); replaces `sync_ref_every`."""
    ref_model_sync_steps: int = Field(512, ge=1)
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
    loss_type: Literal["grpo", "bnpo", "dr_grpo", "dapo", "cispo"] = "grpo"
    """How per-token losses are formed and averaged; see grpo/loss.py. `cispo` (MiniMax-M1)
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
    first (GDPO, arXiv:2601.05242); see grpo/advantages.py."""
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

    max_prompt_length: int = Field(512, ge=1, le=131072)
    """Prompt tokens at most: a longer prompt loses the start of its content (the prompt
    text or the last user turn), never its template or other turns (see prompt_fit.py);
    the metric prompts/truncated counts them. TRL's name."""
    max_completion_length: int = Field(16, ge=1, le=131072)
    """Tokens generated at most per completion."""
    temperature: float = Field(1.0, gt=0, le=10)
    """Sampling temperature."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling mass; 1 disables."""
    top_k: int = Field(0, ge=0)
    """Sample among the k most likely tokens; 0 disables."""
    min_p: float | None = Field(None, ge=0, le=1)
    """Drop tokens less likely than min_p times the most likely one (Nguyen et al. 2024,
    arXiv:2407.01082); None disables."""
    repetition_penalty: float = Field(1.0, gt=0, le=10)
    """Logits of tokens already in the prompt or completion are divided by it (multiplied
    when negative; CTRL, arXiv:1909.05858); 1 disables."""
    stop: tuple[Annotated[str, Field(min_length=1, max_length=200)], ...] = Field((), max_length=16)
    """Strings that end a completion; the stop string is kept in the completion."""

    learning_rate: float = Field(1e-5, gt=0, le=1)
    """Peak learning rate."""
    lr_scheduler_type: Literal["constant", "linear", "cosine"] = "constant"
    """Decay after warmup."""
    warmup_steps: int = Field(0, ge=0)
    """Linear warmup steps."""
    weight_decay: float = Field(0.0, ge=0, le=1)
    """Decoupled weight decay."""
    max_grad_norm: float | None = Field(1.0, gt=0)
    """Gradient clipping by global norm; None disables."""
    optim: Literal["adamw_torch", "adafactor"] = "adamw_torch"
    """Optimizer."""
    micro_batch_size: int | None = Field(None, ge=1, le=1_048_576)
    """Completions per forward/backward pass of the update and of the reference and
    old-policy passes; gradients accumulate across passes and each pass's loss is divided
    by the whole step's normalizer, so the step equals the full batch's. A group may be
    split. None: all B x G at once. Bounds activation memory (TRL's nearest knob is
    per_device_train_batch_size with gradient_accumulation_steps)."""
    generation_batch_size: int | None = Field(None, ge=1, le=1_048_576)
    """Completions decoded at once, in whole groups: a multiple of num_generations. Bounds
    the KV cache. None: all B x G at once. Samples do not depend on it (one seeded stream
    per group). Not TRL's generation_batch_size, which counts completions per generation
    round across gradient accumulation."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward to save memory."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """bf16 autocast where the hardware has it (auto), or forced."""
    lora: LoraSpec | None = None
    """Train LoRA adapters instead of the full model."""

    seed: int = Field(0, ge=0, le=2**32 - 1)
    """Seeds data order, sampling and initialisation."""
    save_steps: int = Field(10, ge=0)
    """Checkpoint every k steps (and at the end); 0 only at the end."""
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d{1,2})?)$")
    """`auto` picks CUDA when present, else CPU."""
    resources: ResourcesSpec = ResourcesSpec()
    """Queue routing."""
    logging: LoggingSpec = LoggingSpec()
    """What is kept of each step."""
    eval: EvalSpec | None = None
    """Held-out evaluation during training; None: none."""

    @model_validator(mode="before")
    @classmethod
    def _map_legacy(cls, data: object) -> object:
        return map_legacy_fields(data)

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

    @field_validator("epsilon_high")
    @classmethod
    def _clip_range_ordered(cls, value: float | None, info: ValidationInfo) -> float | None:
        epsilon = info.data.get("epsilon")
        if value is not None and epsilon is not None and value < epsilon:
            raise ValueError(f"must be >= epsilon ({epsilon})")
        return value

    @field_validator("generation_batch_size")
    @classmethod
    def _whole_groups(cls, value: int | None, info: ValidationInfo) -> int | None:
        g = info.data.get("num_generations")
        if value is not None and g is not None and value % g:
            raise ValueError(f"must be a multiple of num_generations ({g}): groups decode whole")
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
        if value == "cispo" and (eps_high is None or eps_high < 1):
            raise ValueError(
                "cispo caps the importance weight at epsilon_high itself: set epsilon_high "
                ">= 1 (MiniMax-M1 / ScaleRL use about 5)"
            )
        return value

    @field_validator("resources")
    @classmethod
    def _ranks_fit(cls, value: ResourcesSpec, info: ValidationInfo) -> ResourcesSpec:
        ranks, prompts = value.num_processes, info.data.get("prompts_per_step")
        if prompts is not None and ranks > prompts:
            raise ValueError(
                f"num_processes ({ranks}) must be at most prompts_per_step ({prompts}): "
                "whole groups are dealt to ranks"
            )
        if value.sharding == "fsdp":
            raise ValueError("sharding fsdp is not implemented yet (FSDP2 fully_shard); use ddp")
        dynamic = info.data.get("dynamic_sampling")
        if ranks > 1 and dynamic is not None and dynamic.enabled:
            raise ValueError("num_processes > 1 with dynamic_sampling is not supported yet")
        return value

    @model_validator(mode="after")
    def _algorithm_consistent(self) -> JobSpec:
        if self.sync_ref_model and self.lora is not None and self.ref_model_mixup_alpha != 1:
            raise ValueError(
                "with lora, ref_model_mixup_alpha must be 1: a mix of two LoRA factor pairs "
                "is not the mix of their weight updates"
            )
        return self

    @property
    def notes(self) -> list[str]:
        """Legal but questionable combinations, logged at the start of a run."""
        notes = []
        if self.importance_sampling_level == "sequence" and self.loss_type != "grpo":
            notes.append(
                f"importance_sampling_level sequence with loss_type {self.loss_type} sums "
                "per-token terms, weighting each sequence by its length; GSPO intends grpo"
            )
        if self.sync_ref_model and self.beta == 0:
            notes.append("sync_ref_model has no effect with beta 0 (no reference is kept)")
        return notes

    @property
    def eval_data(self) -> DataSpec:
        """The data section that loads the eval examples: the run's, with eval's fields."""
        ev = self.eval or EvalSpec()
        changes = {"source": ev.source, "prompt_field": ev.prompt_field,
                   "answer_field": ev.answer_field}  # fmt: skip
        return self.data.model_copy(
            update={"split": ev.split, **{k: v for k, v in changes.items() if v is not None}}
        )

    @property
    def completions_per_step(self) -> int:
        """B x G completions sampled each step."""
        return self.prompts_per_step * self.num_generations

    @property
    def display_name(self) -> str:
        """Name shown in lists."""
        return self.name or f"{self.model} on {self.data.source}"
