"""Per-token log-probabilities of sampled completions, one micro-batch of rows at a time.

The G completions of a group share their prompt, so the prompt runs once per group among
the rows and its KV cache is gathered for each of that group's rows (a group split across
two micro-batches runs its prompt once in each); gradients flow through the shared pass.
The hidden states of the unmasked tokens go through the LM head in chunks (models/lm_head.py),
so no (n, T, V) logits exist. Knows nothing of rewards or the loss.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from grpo.models.kv_cache import cache_argument, cache_of
from grpo.models.lm_head import decoder_and_head, head_logit_knobs, token_logps
from grpo.rollout.rollout import Rollout, prompt_positions


def completion_logps(
    model: Any,
    rollout: Rollout,
    *,
    rows: slice = slice(None),
    temperature: float = 1.0,
    share_prompt: bool = True,
) -> Tensor:
    """log pi(o_t | q, o_<t) of the sampled tokens of `rows` of the rollout (n, T); 0 on padding."""
    logps, _ = _token_values(model, rollout, rows, temperature, share_prompt, with_entropy=False)
    return logps


def completion_logps_entropy(
    model: Any,
    rollout: Rollout,
    *,
    rows: slice = slice(None),
    temperature: float = 1.0,
    share_prompt: bool = True,
    entropy_grad: bool = True,
) -> tuple[Tensor, Tensor]:
    """completion_logps and the policy's entropy at each position (n, T), both with
    gradient (for the entropy bonus; the entropy without it when not `entropy_grad`), from
    the same chunks of logits."""
    logps, entropy = _token_values(
        model, rollout, rows, temperature, share_prompt, True, entropy_grad
    )
    assert entropy is not None
    return logps, entropy


def _token_values(
    model: Any,
    rollout: Rollout,
    rows: slice,
    temperature: float,
    share_prompt: bool,
    with_entropy: bool,
    entropy_grad: bool = True,
) -> tuple[Tensor, Tensor | None]:
    start, stop, _ = rows.indices(rollout.completion_ids.shape[0])
    g = rollout.num_generations
    groups = torch.arange(start // g, (stop - 1) // g + 1, device=rollout.prompt_ids.device)
    prompt_of_row = torch.arange(start, stop, device=groups.device) // g - start // g  # (n,)
    mask = rollout.completion_mask[start:stop].bool()  # (n, T)
    width = max(1, int(mask.sum(dim=1).max()))
    ids = rollout.completion_ids[start:stop, :width]  # (n, width)
    decoder, head = decoder_and_head(model)
    prompt = (rollout.prompt_ids[groups], rollout.prompt_mask[groups])
    if share_prompt:
        hidden = _hidden_shared_prompt(decoder, *prompt, prompt_of_row, ids)
    else:
        hidden = _hidden_full_sequence(decoder, *prompt, prompt_of_row, ids)
    is_real = mask[:, :width]
    logps, entropy = token_logps(
        hidden[is_real],
        head,
        ids[is_real],
        temperature=temperature,
        head_logits=head_logit_knobs(getattr(model, "config", None)),
        with_entropy=with_entropy,
        entropy_grad=entropy_grad,
    )  # (K,) one per unmasked token

    def placed(values: Tensor) -> Tensor:
        return values.new_zeros(mask.shape).masked_scatter(mask, values)  # (n, T)

    return placed(logps), None if entropy is None else placed(entropy)


def _hidden_shared_prompt(
    decoder: Any, prompt_ids: Tensor, prompt_mask: Tensor, prompt_of_row: Tensor, ids: Tensor
) -> Tensor:
    """Run each prompt once, gather its KV cache for its rows, then run the completions on it."""
    n, width = ids.shape
    positions = prompt_positions(prompt_mask)  # (b, P)
    out = decoder(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=positions,
        use_cache=width > 1,
    )
    first = out.last_hidden_state[:, -1][prompt_of_row][:, None]  # (n, 1, H) predicts token 0
    if width == 1:
        return first  # type: ignore[no-any-return]
    cache = cache_of(out)
    cache.batch_select_indices(prompt_of_row)
    # padding after EOS sits at the end, so causal attention keeps it out of every real token
    attention = torch.cat([prompt_mask[prompt_of_row], prompt_mask.new_ones(n, width - 1)], dim=1)
    steps = torch.arange(1, width, device=positions.device)
    rest = decoder(
        input_ids=ids[:, :-1],
        attention_mask=attention,
        position_ids=positions[prompt_of_row, -1:] + steps,  # (n, width - 1)
        use_cache=True,
        **{cache_argument(decoder): cache},
    ).last_hidden_state
    return torch.cat([first, rest], dim=1)  # (n, width, H)


def _hidden_full_sequence(
    decoder: Any, prompt_ids: Tensor, prompt_mask: Tensor, prompt_of_row: Tensor, ids: Tensor
) -> Tensor:
    """Plain prompt+completion forward of every row (gradient checkpointing takes this path)."""
    prompt_width, width = prompt_ids.shape[1], ids.shape[1]
    attention = torch.cat([prompt_mask[prompt_of_row], torch.ones_like(ids)], dim=1)
    hidden = decoder(
        input_ids=torch.cat([prompt_ids[prompt_of_row], ids], dim=1),
        attention_mask=attention,
        position_ids=prompt_positions(attention),
        use_cache=False,
    ).last_hidden_state  # (n, P + width, H)
    return hidden[:, prompt_width - 1 : prompt_width - 1 + width]  # type: ignore[no-any-return]
