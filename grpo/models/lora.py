"""LoRA adapters through peft, and swapping adapter weights in and out.

With LoRA the reference policy needs no second copy of the model: it is the base model
with the adapters disabled, or, after a reference sync, the adapters set to a saved
snapshot. Knows nothing of the GRPO objective.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from grpo.spec.optimization import LoraSpec


def apply_lora(model: Any, lora: LoraSpec) -> Any:
    """Wrap the model with trainable adapters; base weights are frozen."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,  # type: ignore[arg-type]  # peft annotates int, scales by float
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def is_lora(model: Any) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def adapter_snapshot(model: Any) -> dict[str, Tensor]:
    """Copies of the trainable (adapter) weights."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


@contextmanager
def swapped_adapter(model: Any, snapshot: dict[str, Tensor]) -> Iterator[None]:
    """Run the block with the adapter weights set to `snapshot`, then put the live ones back."""
    params = dict(model.named_parameters())
    live = {name: params[name].detach().clone() for name in snapshot}
    with torch.no_grad():
        for name, value in snapshot.items():
            params[name].copy_(value)
    try:
        yield
    finally:
        with torch.no_grad():
            for name, value in live.items():
                params[name].copy_(value)
