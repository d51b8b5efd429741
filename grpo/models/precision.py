"""Compute precision: which dtype autocast runs in, and the autocast region itself.

Weights stay fp32 (master copy for the optimizer); bf16 is autocast where the hardware
computes it natively. Knows nothing of GRPO.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from grpo.models.loading import supports_bf16


def compute_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 when asked or (auto) when native on the device; None means plain fp32."""
    match precision:
        case "fp32":
            return None
        case "bf16":
            return torch.bfloat16
        case "auto":
            return torch.bfloat16 if supports_bf16(device) else None
    raise ValueError(f"precision must be auto, fp32 or bf16, got {precision!r}")


def autocast(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager[Any]:
    """One autocast region; its weight-cast cache lives as long as the region, so wrap the
    whole generation loop in one region rather than each decode step."""
    if dtype is None:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
