"""Optimizer and learning-rate schedule built from the spec.

One scheduler step per GRPO step (a generation batch), so warmup and decay are counted
in the same steps as `max_steps`. Knows nothing of the GRPO objective.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch.optim.lr_scheduler import LambdaLR

from grpo.spec import JobSpec


def build_optimizer(params: Iterable[torch.nn.Parameter], spec: JobSpec) -> torch.optim.Optimizer:
    """AdamW (torch's fused kernel where the parameters allow it), or Adafactor with a fixed
    learning rate (no relative step, no param scaling)."""
    trainable = [p for p in params if p.requires_grad]
    match spec.optim:
        case "adamw_torch":
            return torch.optim.AdamW(
                trainable,
                lr=spec.learning_rate,
                weight_decay=spec.weight_decay,
                eps=spec.adam_epsilon,
                fused=can_fuse(trainable) or None,
            )
        case "adafactor":
            from transformers.optimization import Adafactor

            return Adafactor(  # type: ignore[no-untyped-call]
                trainable,
                lr=spec.learning_rate,
                weight_decay=spec.weight_decay,
                scale_parameter=False,
                relative_step=False,
                warmup_init=False,
            )
    raise ValueError(f"unknown optimizer {spec.optim!r}")


def can_fuse(params: list[torch.nn.Parameter]) -> bool:
    """Whether torch's fused AdamW kernel takes every parameter: floating point, on the CPU or
    CUDA (FSDP2's DTensors included). Same update as the per-tensor loop up to fp32
    rounding, in one kernel call instead of a dozen small ops per tensor: on the demo model
    (38 tensors, 269k parameters, one CPU thread) 0.7 ms a step against 5.3 ms. Elsewhere
    (other devices, integer tensors) torch's default (foreach or loop) applies. Transformers
    calls this `optim="adamw_torch_fused"`.
    """
    return bool(params) and all(
        p.device.type in ("cpu", "cuda") and torch.is_floating_point(p) for p in params
    )


def lr_factor(step: int, *, warmup_steps: int, total_steps: int, kind: str) -> float:
    """Multiple of the peak rate at 0-based `step`: linear warmup, then constant/linear/cosine."""
    if step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    match kind:
        case "constant":
            return 1.0
        case "linear":
            return max(0.0, 1.0 - progress)
        case "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    raise ValueError(f"unknown lr_scheduler_type {kind!r}")


def build_scheduler(optimizer: torch.optim.Optimizer, spec: JobSpec) -> LambdaLR:
    return LambdaLR(
        optimizer,
        lambda step: lr_factor(
            step,
            warmup_steps=spec.warmup_steps,
            total_steps=spec.max_steps,
            kind=spec.lr_scheduler_type,
        ),
    )
