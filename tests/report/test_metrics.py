"""Step metrics: plain floats from tensors, checked against numbers worked by hand."""

from __future__ import annotations

import torch

from grpo.report.metrics import masked_mean


def test_masked_mean_counts_only_unmasked_tokens_and_broadcasts_per_sequence_values() -> None:
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # 3 unmasked tokens
    tokens = torch.tensor([[1.0, 2.0, 100.0], [3.0, 100.0, 100.0]])
    assert masked_mean(tokens, mask) == 2.0  # (1 + 2 + 3) / 3
    per_sequence = torch.tensor([[3.0], [6.0]])  # (N, 1): 3 counts twice, 6 once -> 12 / 3
    assert masked_mean(per_sequence, mask) == 4.0
    assert masked_mean(tokens, torch.zeros(2, 3)) == 0.0
