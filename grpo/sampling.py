"""Next-token sampling: temperature, top-k and nucleus (top-p) filtering.

Pure tensor math on one decode step's logits; knows nothing of models or caches.
"""

from __future__ import annotations

import torch
from torch import Tensor


def sample_next_tokens(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """logits (N, V) -> token ids (N,) drawn from softmax(logits / T) after top-k, top-p."""
    scores = logits.float() / temperature  # (N, V)
    if 0 < top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[:, -1:]  # (N, 1)
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        scores = _nucleus(scores, top_p)
    probs = torch.softmax(scores, dim=-1)  # (N, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def token_entropy(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Entropy of softmax(s), s = logits / T: logsumexp(s) - sum softmax(s) * s; (N, V) -> (N,)."""
    scores = logits.float() / temperature
    return torch.logsumexp(scores, dim=-1) - (torch.softmax(scores, dim=-1) * scores).sum(dim=-1)


def _nucleus(scores: Tensor, top_p: float) -> Tensor:
    """Keep the smallest set of tokens whose probability reaches top_p (Holtzman et al., 2020)."""
    sorted_scores, order = torch.sort(scores, descending=True, dim=-1)  # (N, V)
    cumulative = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)
    # drop a token when the mass before it already reaches top_p; the top token always stays
    is_dropped = (cumulative - torch.softmax(sorted_scores, dim=-1)) >= top_p
    is_dropped[:, 0] = False
    dropped = torch.zeros_like(is_dropped).scatter(-1, order, is_dropped)
    return scores.masked_fill(dropped, float("-inf"))
