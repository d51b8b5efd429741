"""The device this worker trains on, what it has free, and whether a job fits it.

A worker started with CUDA_VISIBLE_DEVICES sees only those GPUs (as cuda:0..n-1), so a
job asking for a GPU this worker cannot see, or for more free memory than it has, is
left queued for another worker.
"""

from __future__ import annotations

from pathlib import Path

from grpo.spec import JobSpec


def device_label() -> str:
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return "cpu"


def free_memory_mb(device: str) -> int | None:
    """Free memory of a CUDA device, or available memory of the host for the CPU."""
    if device.startswith("cuda"):
        import torch

        index = int(device.split()[0].partition(":")[2] or 0)
        return int(torch.cuda.mem_get_info(index)[0] // 2**20)
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return None


def fit_problem(spec: JobSpec) -> str | None:
    """Why this worker cannot run `spec`, or None when it can."""
    import torch

    ranks = spec.resources.num_processes
    if ranks > 1:
        return (
            f"resources.num_processes is {ranks}; this worker runs one process per run "
            "(multi-rank runs: grpo train, for now)"
        )
    visible = torch.cuda.device_count()
    if spec.device.startswith("cuda"):
        index = int(spec.device.partition(":")[2] or 0)
        if index >= visible:
            sees = f"cuda:0..cuda:{visible - 1}" if visible else "no GPU"
            return f"device {spec.device} is not on this worker, which sees {sees}"
        device = f"cuda:{index}"
    else:
        device = "cuda:0" if spec.device == "auto" and visible else "cpu"
    need_gb = spec.resources.min_free_memory_gb
    free_mb = free_memory_mb(device) if need_gb else None
    if need_gb and free_mb is not None and free_mb < need_gb * 1024:
        return f"needs {need_gb:g} GiB free on {device}; this worker has {free_mb / 1024:.1f} GiB"
    return None
