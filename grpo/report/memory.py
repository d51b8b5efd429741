"""How much of its device a step used: `memory/peak_gb` (the most torch's caching allocator
held during the step) and `memory/device_gb` (the device's size), on CUDA only; the run
doctor's memory rule reads them (grpo/doctor/resources.py). On rank 0, for rank 0's device."""

from __future__ import annotations

import torch


def reset_peak_memory(device: torch.device) -> None:
    """Start the step's peak from what is held now."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def memory_scalars(device: torch.device) -> dict[str, float]:
    """The step's peak and the device's size in GB; {} off CUDA (a CPU shares the host's
    memory with everything else: no limit of the run's own to be near)."""
    if device.type != "cuda":
        return {}
    return {
        "memory/peak_gb": torch.cuda.max_memory_reserved(device) / 1e9,
        "memory/device_gb": torch.cuda.get_device_properties(device).total_memory / 1e9,
    }
