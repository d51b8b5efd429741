"""Next-token sampling: repetition penalty, temperature, top-k, nucleus (top-p), min-p.

Applied in the order transformers' generate applies them: the penalty on raw logits, then
temperature, then the filters.

Pure tensor math on one decode step's logits; knows nothing of models or caches.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def sample_next_tokens(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    min_p: float | None = None,
    repetition_penalty: float = 1.0,
    seen: Tensor | None = None,
    uniforms: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """logits (N, V) -> token ids (N,) drawn from softmax(logits / T) after the filters, and
    the entropy of softmax(logits / T) before them (N,): the two share one softmax, which
    the draw reuses when no penalty or filter changed the scores.

    seen (N, V) bool marks tokens already in each row's prompt or completion (for the
    repetition penalty). Inverse-CDF sampling: row i takes the first token whose cumulative
    probability reaches uniforms[i] in (0, 1] (fresh draws when None), so a row's token
    depends on its own distribution and draw only, never on the other rows of the batch.
    """
    tempered = logits.float() / temperature  # (N, V)
    probs = torch.softmax(tempered, dim=-1)  # (N, V)
    entropy = torch.logsumexp(tempered, dim=-1) - (probs * tempered).sum(dim=-1)  # (N,)
    scores = tempered
    if repetition_penalty != 1.0 and seen is not None:
        scores = penalize_repetition(logits.float(), seen, repetition_penalty) / temperature
    if top_k == 1:  # greedy: the first of tied maxima (bf16 logits tie often), no draw
        return scores.argmax(dim=-1), entropy
    if 0 < top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[:, -1:]  # (N, 1)
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        scores = _nucleus(scores, top_p)
    if min_p is not None and min_p > 0:
        scores = min_p_filter(scores, min_p)
    if scores is not tempered:  # penalised or filtered: the draw needs its own softmax
        probs = torch.softmax(scores, dim=-1)
    cdf = probs.cumsum(dim=-1)  # (N, V)
    if uniforms is None:
        uniforms = 1 - torch.rand(len(cdf), device=cdf.device)
    # (0, 1]: a draw of exactly 0 would pick token 0 even at probability 0
    target = (uniforms.to(cdf.dtype) * cdf[:, -1])[:, None]  # (N, 1)
    tokens = torch.searchsorted(cdf, target).squeeze(1).clamp(max=cdf.shape[-1] - 1)
    return tokens, entropy


class GroupUniforms:
    """U(0, 1] draws for sample_next_tokens, one per completion and token, G rows per group.

    Each group draws from its own CPU generator seeded with its seed, `block` tokens at a
    time as decoding reaches them: a group's samples then depend on its seed and the model
    alone, not on the device, the batch or the other groups. No seeds: torch's global RNG.
    """

    def __init__(
        self,
        seeds: Sequence[int] | None,
        *,
        num_rows: int,
        device: torch.device,
        block: int = 64,
    ) -> None:
        self.generators = (
            None if seeds is None else [torch.Generator().manual_seed(s) for s in seeds]
        )
        self.num_rows, self.device, self.block = num_rows, device, block
        self.drawn = torch.empty(0)

    def at(self, t: int) -> Tensor:
        """Draws for token t of every row (N,); t must advance 0, 1, 2, ..."""
        if t % self.block == 0:
            if self.generators is None:
                draws = torch.rand((self.num_rows, self.block))
            else:
                rows = self.num_rows // len(self.generators)
                draws = torch.cat(
                    [torch.rand((rows, self.block), generator=g) for g in self.generators]
                )
            self.drawn = (1 - draws).to(self.device)  # (N, block)
        return self.drawn[:, t % self.block]


def penalize_repetition(logits: Tensor, seen: Tensor, penalty: float) -> Tensor:
    """Seen tokens' logits l -> l / penalty when l > 0, l * penalty when l <= 0 (CTRL, Keskar
    et al. 2019, arXiv:1909.05858), so penalty > 1 always makes them less likely."""
    penalized = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalized, logits)


def min_p_filter(scores: Tensor, min_p: float) -> Tensor:
    """Keep tokens with p >= min_p * max p (Nguyen et al. 2024, arXiv:2407.01082); p after
    temperature, so the cut scales with the model's confidence."""
    probs = torch.softmax(scores, dim=-1)  # (N, V)
    is_dropped = probs < min_p * probs.max(dim=-1, keepdim=True).values
    return scores.masked_fill(is_dropped, float("-inf"))


def _nucleus(scores: Tensor, top_p: float) -> Tensor:
    """Keep the smallest set of tokens whose probability reaches top_p (Holtzman et al., 2020)."""
    sorted_scores, order = torch.sort(scores, descending=True, dim=-1)  # (N, V)
    probs = torch.softmax(sorted_scores, dim=-1)  # (N, V)
    # drop a token when the mass before it already reaches top_p; the top token always stays
    is_dropped = (probs.cumsum(dim=-1) - probs) >= top_p
    is_dropped[:, 0] = False
    dropped = torch.zeros_like(is_dropped).scatter(-1, order, is_dropped)
    return scores.masked_fill(dropped, float("-inf"))


SEED_MODULUS = 2**63 - 1
"""What every stream seed is reduced modulo (a torch.Generator takes < 2**64)."""
EVAL_ROUND = 1_000
"""Held-out evaluation's stream offset (EVAL_ROUND * 7_919, without the groups' stride):
its streams are a family apart from the training rounds'."""


def stream_seed(
    base: int,
    offset: int,
    position: int,
    *,
    scale: int = 1_000_003,
    stride: int = 1,
    modulus: int = SEED_MODULUS,
) -> int:
    """((base * scale + offset) * stride + position) % modulus: the one formula every
    sampling stream's seed is made by, from the run's seed (a group's stream) or from a
    group's seed (a completion's or a trajectory's stream). Each stream's own constants
    (its keyword arguments, in the named functions below and in grpo/engines/) keep the
    seeds every earlier run drew, so what a seed samples never changed."""
    return ((base * scale + offset) * stride + position) % modulus


def group_seed(seed: int, step: int, position: int, round_index: int = 0) -> int:
    """Seed of the sampling stream of the group at `position` (0-based) of `step`'s
    dynamic-sampling round `round_index`: distinct per (seed, step, round, position), stable
    across runs, batchings and machines."""
    return stream_seed(seed, step + round_index * 1_000_000_007, position, stride=1_000_033)


def eval_seed(seed: int, position: int) -> int:
    """Seed of held-out example `position`'s sampling stream (the same at every eval step,
    so evals differ by the policy alone): seed * 1_000_003 + EVAL_ROUND * 7_919 + position."""
    return stream_seed(seed, EVAL_ROUND * 7_919, position)
