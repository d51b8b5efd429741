"""What this worker trains on, as users should read it."""

from __future__ import annotations


def device_label() -> str:
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return "cpu"
