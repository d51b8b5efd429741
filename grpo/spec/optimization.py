"""How a JobSpec's update is computed: optimizer and schedule, micro-batching, memory savers
and LoRA. Pydantic only, imports without torch; grpo/spec/ composes these fields into
JobSpec, grpo/training/optim.py, grpo/training/update.py and grpo/models/lora.py apply them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from grpo.spec.config import SECTION_CONFIG, OptionalSpecInt, SpecInt


class LoraSpec(BaseModel):
    """Train LoRA adapters instead of all weights; the reference is the adapter-free model."""

    model_config = SECTION_CONFIG
    r: SpecInt = Field(8, ge=1, le=1024)
    """Rank of the adapters."""
    alpha: float = Field(16.0, gt=0)
    """Scaling numerator (scale = alpha / r)."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the adapter input (0 keeps log-probs deterministic)."""
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    """Names of the linear layers that get adapters."""


class OptimizationKnobs(BaseModel):
    """Learning rate and schedule, batching of the passes, precision and LoRA."""

    model_config = SECTION_CONFIG
    learning_rate: float = Field(1e-5, gt=0, le=1)
    """Peak learning rate."""
    lr_scheduler_type: Literal["constant", "linear", "cosine"] = "constant"
    """Decay after warmup."""
    warmup_steps: SpecInt = Field(0, ge=0, le=10**9)
    """Linear warmup steps."""
    weight_decay: float = Field(0.0, ge=0, le=1)
    """Decoupled weight decay."""
    adam_epsilon: float = Field(1e-8, gt=0, le=1)
    """AdamW's epsilon, added to the root of the second moment (TRL/transformers:
    adam_epsilon; Kingma & Ba 2015, "Adam"). A weight's first step is about
    lr * g / (|g| + epsilon), so with the default a gradient entry near 1e-9 moves as far as
    a large one; a larger epsilon damps entries that are mostly rounding noise."""
    max_grad_norm: float | None = Field(1.0, gt=0)
    """Gradient clipping by global norm; None disables."""
    optim: Literal["adamw_torch", "adafactor"] = "adamw_torch"
    """Optimizer. adamw_torch runs torch's fused AdamW kernel when every trainable parameter
    is a floating-point CPU or CUDA tensor (transformers' `adamw_torch_fused`), else torch's
    default AdamW; the update is the same up to fp32 rounding."""
    micro_batch_size: OptionalSpecInt = Field(None, ge=1, le=1_048_576)
    """Completions per forward/backward pass of the update and of the reference and
    old-policy passes; gradients accumulate across passes and each pass's loss is divided
    by the whole step's normalizer, so the step equals the full batch's. A group may be
    split. None: all B x G at once. Bounds activation memory (TRL's nearest knob is
    per_device_train_batch_size with gradient_accumulation_steps)."""
    generation_batch_size: OptionalSpecInt = Field(None, ge=1, le=1_048_576)
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
