"""Log-probabilities of chosen tokens from hidden states, never holding all their logits.

A causal LM's logits for n completions of T tokens are an (n, T, V) tensor: with a 152k
vocabulary, 256 x 128 tokens are 19.9 GB in fp32, several times over once log-softmax and
autograd keep their copies. Only the sampled token's log-probability is needed, so the LM
head and the log-softmax run on chunks of at most `LOGITS_BUDGET` logits ("selective
log-softmax"), and with gradients each chunk is recomputed in backward instead of being
kept (activation checkpointing of the head alone). The head's logits get what the model's
own forward does to them after its LM head (`head_logit_knobs`), so the log-probs equal
those of the logits the completions were sampled from. Knows nothing of GRPO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

LOGITS_BUDGET = 2**24
"""fp32 logits held at once (64 MiB): the chunk is LOGITS_BUDGET // V tokens."""


def decoder_and_head(model: Any) -> tuple[Any, Any]:
    """The transformer body (ids -> hidden states) and the LM head of a causal LM, LoRA or not."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings()


@dataclass(frozen=True)
class HeadLogits:
    """What a causal LM's forward does to its LM head's output (head_logit_knobs)."""

    scale: float | None = None
    """Multiplies the logits (Cohere's `logit_scale`, 1 / Granite's `logits_scaling`)."""
    softcap: float | None = None
    """Then caps them: softcap * tanh(z / softcap) (Gemma 2's `final_logit_softcapping`)."""


def head_logit_knobs(config: Any) -> HeadLogits:
    """What a causal LM's forward does to its LM head's output, as token_logps' `head_logits`:
    Cohere's `logit_scale` multiplies the logits and Granite's `logits_scaling` divides them;
    Gemma 2's `final_logit_softcapping` then caps them. None: nothing."""
    multiplier = getattr(config, "logit_scale", None)
    divisor = getattr(config, "logits_scaling", None)
    scale = None
    if multiplier is not None or divisor is not None:
        scale = float(multiplier if multiplier is not None else 1) / float(divisor or 1)
    return HeadLogits(scale, getattr(config, "final_logit_softcapping", None))


def token_logps(
    hidden: Tensor,
    head: Any,
    tokens: Tensor,
    *,
    temperature: float,
    head_logits: HeadLogits = HeadLogits(),
    with_entropy: bool = False,
    entropy_grad: bool = True,
    chunk_tokens: int | None = None,
) -> tuple[Tensor, Tensor | None]:
    """log softmax(z / temperature)[token] per row, z = softcap(scale * head(h)): hidden
    (K, H), tokens (K,) -> (K,), and with_entropy the entropy of softmax(z / temperature) per
    row (K,); both carry gradient (the entropy bonus needs it), the entropy none with
    `entropy_grad` False (a statistic: its (K, V) softmax is then never kept for backward).
    The log-probs and the entropy share one logsumexp.

    Dividing by the sampling temperature makes the ratio compare the distributions the
    tokens were drawn from (as TRL does). `head_logits` repeats what the model's forward
    does after its head (head_logit_knobs); by default nothing.
    """
    size = chunk_tokens or max(1, LOGITS_BUDGET // head.weight.shape[0])
    knobs = (temperature, head_logits.scale, head_logits.softcap, with_entropy, entropy_grad)
    if hidden.shape[0] <= size:  # one chunk: within budget, so it may be kept for backward
        values = _chunk_values(hidden, head, tokens, *knobs)
    else:
        is_checkpointed = torch.is_grad_enabled()
        parts = []
        for start in range(0, hidden.shape[0], size):
            args = (hidden[start : start + size], head, tokens[start : start + size], *knobs)
            if is_checkpointed:
                parts.append(checkpoint(_chunk_values, *args, use_reentrant=False))
            else:
                parts.append(_chunk_values(*args))
        values = torch.cat(parts)  # (K, 1 or 2)
    return values[:, 0], values[:, 1] if with_entropy else None


def _chunk_values(
    hidden: Tensor,
    head: Any,
    tokens: Tensor,
    temperature: float,
    scale: float | None,
    softcap: float | None,
    with_entropy: bool,
    entropy_grad: bool = True,
) -> Tensor:
    """(k, 1): the chosen tokens' log-probs; (k, 2) with their distributions' entropies
    (without gradient unless `entropy_grad`)."""
    logits: Tensor = head(hidden).float()  # (k, V)
    if scale is not None:
        logits = logits * scale
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    scores = logits / temperature
    norm = torch.logsumexp(scores, dim=-1)  # (k,)
    logps = scores.gather(-1, tokens[:, None]).squeeze(-1) - norm  # (k,)
    if not with_entropy:
        return logps[:, None]
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        probs = torch.exp(scores - norm[:, None])  # (k, V) softmax from the same logsumexp
        entropy = norm - (probs * scores).sum(dim=-1)  # (k,)
    return torch.stack([logps, entropy], dim=-1)
