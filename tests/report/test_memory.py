"""The step's memory scalars the doctor's memory rule reads: CUDA only."""

from __future__ import annotations

import pytest
import torch

from grpo.report.memory import memory_scalars, reset_peak_memory


def test_a_cpu_step_reports_no_device_memory() -> None:
    reset_peak_memory(torch.device("cpu"))
    assert memory_scalars(torch.device("cpu")) == {}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_step_reports_its_peak_under_the_device_size() -> None:
    device = torch.device("cuda:0")
    reset_peak_memory(device)
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)  # 256 MiB
    scalars = memory_scalars(device)
    assert 0.268 <= scalars["memory/peak_gb"] < scalars["memory/device_gb"]
    del block
