"""Rollout: sample G completions per prompt.

Generation is a batched decode loop over generation_batch_size completions (whole groups;
all B x G by default) with a KV cache; each group samples from its own seeded stream. The
G completions of a group share their prompt, so the prompt is run once per group (B rows,
left-padded) and its cache is repeated G times; the cache grows in place (models/kv_cache.py),
and rows that have emitted EOS leave it once they are a quarter of it. The sampling
distribution's entropy is recorded on the way; log-probs for the loss are training/logprobs.py's.
Knows nothing of rewards or the loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor

from grpo.models.kv_cache import cache_argument, cache_of, preallocate
from grpo.rollout.sampling import GroupUniforms, sample_next_tokens
from grpo.rollout.stopping import StopStrings
from grpo.spec.generation import Sampling


@dataclass(frozen=True)
class Rollout:
    """B prompts and their G completions each (row i of the completions is group i // G)."""

    prompt_ids: Tensor  # (B, P) left-padded
    prompt_mask: Tensor  # (B, P) 1 on prompt tokens
    completion_ids: Tensor  # (N, T) right-padded, N = B * G
    completion_mask: Tensor  # (N, T) 1 up to and including EOS
    is_truncated: Tensor  # (N,) True when no EOS came within max_completion_length
    entropy: Tensor | None
    """(N, T) entropy of the sampling distribution, 0 on padding; None when the engine
    measured none (vLLM returns none): the update's own forward pass at the sampling
    weights then gives it (grpo/training/update.py UpdateResult.entropy), with no extra pass."""
    model_mask: Tensor | None = None
    """(N, T) 1 on tokens the model sampled, 0 on tokens put in its context (tool results of
    a multi-turn trajectory): those are never trained on. None: every completion token is
    the model's (single-turn rollouts)."""
    sampling_logps: Tensor | None = None
    """(N, T) the engine's own log-probs of its sampled tokens (vLLM), 0 elsewhere; None when
    the engine is the trainer's own model (native). Only measures and corrects the gap to
    the trainer's recomputed log-probs, never replaces them."""
    trajectories: tuple[Any, ...] | None = None
    """Per completion row, the tool loop's grpo.tools.trajectory.Trajectory (its turns,
    calls and results); None for single-turn rollouts."""
    policy_version: Tensor | None = None
    """(N,) the policy version (optimizer updates) of the weights that sampled each
    completion (grpo/rollout/group_source.py stamps it); None before it is stamped."""

    @property
    def model_token_mask(self) -> Tensor:
        """(N, T) the tokens the loss, the KL and the entropy statistics count: the
        completion's tokens that the model sampled (tool-result tokens left out)."""
        if self.model_mask is None:
            return self.completion_mask
        return self.completion_mask * self.model_mask

    @property
    def num_generations(self) -> int:
        # 0 for a rollout of no group (a rank left without a kept group, dynamic sampling)
        return self.completion_ids.shape[0] // max(1, self.prompt_ids.shape[0])

    @property
    def lengths(self) -> Tensor:
        return self.completion_mask.sum(dim=1)  # (N,)

    def select_groups(self, groups: Tensor) -> Rollout:
        """The rollout restricted to the given group indices (prompts and their G rows)."""
        rows = group_rows(groups, self.num_generations)
        return Rollout(
            self.prompt_ids[groups],
            self.prompt_mask[groups],
            self.completion_ids[rows],
            self.completion_mask[rows],
            self.is_truncated[rows],
            None if self.entropy is None else self.entropy[rows],
            None if self.model_mask is None else self.model_mask[rows],
            None if self.sampling_logps is None else self.sampling_logps[rows],
            None
            if self.trajectories is None
            else tuple(self.trajectories[i] for i in rows.tolist()),
            None if self.policy_version is None else self.policy_version[rows],
        )


def group_rows(groups: Tensor, num_generations: int) -> Tensor:
    """Completion row indices of the given groups, in order: group b owns rows b*G .. b*G+G-1."""
    offsets = torch.arange(num_generations, device=groups.device)
    return (groups[:, None] * num_generations + offsets).flatten()


def concat_rollouts(rollouts: Sequence[Rollout], *, pad_token_id: int) -> Rollout:
    """The groups of several rollouts as one: prompts left-padded and completions
    right-padded to the widest (padding is masked, so no log-prob changes)."""
    prompt_width = max(r.prompt_ids.shape[1] for r in rollouts)
    width = max(r.completion_ids.shape[1] for r in rollouts)

    def pad(t: Tensor, size: int, value: float, *, left: bool = False) -> Tensor:
        extra = size - t.shape[1]
        return torch.nn.functional.pad(t, (extra, 0) if left else (0, extra), value=value)

    return Rollout(
        torch.cat([pad(r.prompt_ids, prompt_width, pad_token_id, left=True) for r in rollouts]),
        torch.cat([pad(r.prompt_mask, prompt_width, 0, left=True) for r in rollouts]),
        torch.cat([pad(r.completion_ids, width, pad_token_id) for r in rollouts]),
        torch.cat([pad(r.completion_mask, width, 0) for r in rollouts]),
        torch.cat([r.is_truncated for r in rollouts]),
        _concat_optional([r.entropy for r in rollouts], width, pad, 0.0),
        _concat_optional([r.model_mask for r in rollouts], width, pad, 0),
        _concat_optional([r.sampling_logps for r in rollouts], width, pad, 0.0),
        None
        if any(r.trajectories is None for r in rollouts)
        else tuple(t for r in rollouts for t in r.trajectories or ()),
        None
        if any(r.policy_version is None for r in rollouts)
        else torch.cat([r.policy_version for r in rollouts if r.policy_version is not None]),
    )


def _concat_optional(
    parts: Sequence[Tensor | None], width: int, pad: Callable[..., Tensor], value: float
) -> Tensor | None:
    """The optional (N, T) fields of concatenated rollouts: all None, or all present (one
    engine and one rollout kind per run)."""
    if all(p is None for p in parts):
        return None
    if any(p is None for p in parts):
        raise ValueError(
            "cannot join rollouts with and without per-token masks, log-probs or entropies"
        )
    return torch.cat([pad(p, width, value) for p in parts if p is not None])


def tokenize_prompts(
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_length: int,
    add_special_tokens: bool,
    device: torch.device,
) -> tuple[Tensor, Tensor]:
    """Left-padded prompt ids and mask (B, P); prompts longer than max_length lose their start."""
    encoded = tokenizer(list(prompts), add_special_tokens=add_special_tokens)["input_ids"]
    rows = [ids[-max_length:] for ids in encoded]
    width = max(len(ids) for ids in rows)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], dtype=torch.long)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
    return ids.to(device), mask.to(device)


def prompt_positions(prompt_mask: Tensor) -> Tensor:
    """Position ids that start at 0 on each row's first real token despite left padding."""
    return (prompt_mask.cumsum(dim=1) - 1).clamp(min=0)  # (B, P)


def row_slices(num_rows: int, size: int | None) -> list[slice]:
    """Consecutive batches of at most `size` rows; None is one batch of all rows."""
    step = max(1, num_rows if size is None else size)
    return [slice(start, min(start + step, num_rows)) for start in range(0, num_rows, step)]


@dataclass(frozen=True)
class CompletionEnds:
    """Where a completion ends, and what fills its row after the end."""

    max_new_tokens: int
    """At most this many tokens (then it is truncated)."""
    eos_token_ids: tuple[int, ...]
    """Any of these ends it, and is kept as its last token."""
    pad_token_id: int
    """Fills every row after its end."""
    stop: StopStrings | None = None
    """Stop strings that end it as an EOS does; None: none."""


@torch.no_grad()
def generate(
    model: Any,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    *,
    num_generations: int,
    ends: CompletionEnds,
    sampling: Sampling,
    seeds: Sequence[int] | None = None,
    generation_batch_size: int | None = None,
) -> Rollout:
    """Sample num_generations completions per prompt, each ending where `ends` says,
    generation_batch_size completions (whole groups) decoded at once; None: all at once.

    Group b draws from its own seeds[b] (sampling.GroupUniforms), so how the groups are
    batched changes no sample, up to floating-point ties. No seeds: torch's global RNG.
    """
    g, device = num_generations, prompt_ids.device
    decode = partial(_generate_groups, model, num_generations=g, ends=ends, sampling=sampling)
    groups_at_once = None if generation_batch_size is None else generation_batch_size // g
    parts = [
        decode(
            prompt_ids[s],
            prompt_mask[s],
            GroupUniforms(
                None if seeds is None else seeds[s], num_rows=g * (s.stop - s.start), device=device
            ),
        )
        for s in row_slices(len(prompt_ids), groups_at_once)
    ]
    if len(parts) == 1:
        return parts[0]
    return concat_rollouts(parts, pad_token_id=ends.pad_token_id)


def _generate_groups(
    model: Any,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    uniforms: GroupUniforms,
    *,
    num_generations: int,
    ends: CompletionEnds,
    sampling: Sampling,
) -> Rollout:
    """One decode of all completions of the given prompts."""
    g = num_generations
    eos = torch.tensor(list(ends.eos_token_ids), device=prompt_ids.device)
    draw: Callable[..., tuple[Tensor, Tensor]] = partial(sample_next_tokens, **asdict(sampling))
    positions = prompt_positions(prompt_mask)  # (B, P)
    out = model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=1,
    )
    cache = cache_of(out)
    preallocate(cache, ends.max_new_tokens)
    cache.batch_repeat_interleave(g)
    is_penalized = sampling.repetition_penalty != 1
    seen = _prompt_tokens(out.logits, prompt_ids, prompt_mask, g) if is_penalized else None

    def sample(logits: Tensor, rows: Tensor, t: int) -> tuple[Tensor, Tensor]:
        token, entropy = draw(
            logits, seen=None if seen is None else seen[rows], uniforms=uniforms.at(t)[rows]
        )
        if seen is not None:
            seen[rows, token] = True
        return token, entropy

    tokens, lengths, entropy, is_stopped = _decode(
        model,
        cache,
        logits=out.logits[:, -1].repeat_interleave(g, dim=0),  # (N, V)
        attention=prompt_mask.repeat_interleave(g, dim=0),  # (N, P)
        next_position=positions[:, -1].repeat_interleave(g) + 1,  # (N,)
        sample=sample,
        eos=eos,
        ends=ends,
    )
    width = int(lengths.max())
    mask = torch.arange(width, device=tokens.device)[None, :] < lengths[:, None]  # (N, T)
    ended = torch.isin(tokens.gather(1, (lengths - 1)[:, None]).squeeze(1), eos)  # (N,)
    ids = tokens[:, :width].masked_fill(~mask, ends.pad_token_id)
    is_truncated = ~(ended | is_stopped)  # a stop string ends a completion as EOS does
    return Rollout(prompt_ids, prompt_mask, ids, mask.long(), is_truncated, entropy[:, :width])


def _prompt_tokens(logits: Tensor, prompt_ids: Tensor, prompt_mask: Tensor, g: int) -> Tensor:
    """(N, V) bool: token ids present in each completion's prompt, padding left out."""
    present = torch.zeros(
        (prompt_ids.shape[0], logits.shape[-1]), dtype=torch.long, device=prompt_ids.device
    )
    present.scatter_reduce_(1, prompt_ids, prompt_mask.long(), reduce="amax")
    return present.bool().repeat_interleave(g, dim=0)


def _decode(
    model: Any,
    cache: Any,
    *,
    logits: Tensor,
    attention: Tensor,
    next_position: Tensor,
    sample: Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor]],
    eos: Tensor,
    ends: CompletionEnds,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The decode loop: tokens (N, max_new_tokens), lengths (N,) incl. EOS, entropies, and
    which rows a stop string ended (N,); `eos`: ends.eos_token_ids on the logits' device."""
    n, device = logits.shape[0], logits.device
    max_new_tokens, stop = ends.max_new_tokens, ends.stop
    pad_token_id = ends.pad_token_id
    tokens = torch.full((n, max_new_tokens), pad_token_id, dtype=torch.long, device=device)
    entropy = torch.zeros((n, max_new_tokens), device=device)
    lengths = torch.full((n,), max_new_tokens, dtype=torch.long, device=device)
    rows = torch.arange(n, device=device)  # completion index of each cache row
    is_alive = torch.ones(n, dtype=torch.bool, device=device)  # per cache row
    is_stopped = torch.zeros(n, dtype=torch.bool, device=device)  # per completion
    cache_arg = cache_argument(model)
    for t in range(max_new_tokens):
        # each row with its own uniform draw; the sampling distribution's entropy comes from
        # the draw's softmax, not from the training pass
        token, token_entropy = sample(logits, rows, t)  # (rows,), (rows,)
        tokens[rows[is_alive], t] = token[is_alive]
        entropy[rows[is_alive], t] = token_entropy[is_alive]
        is_eos = torch.isin(token, eos) & is_alive
        if stop is not None:
            is_stop = _stop_hits(stop, tokens[:, : t + 1], rows, is_alive & ~is_eos)
            is_stopped[rows[is_stop]] = True
            is_eos = is_eos | is_stop
        lengths[rows[is_eos]] = t + 1
        is_alive = is_alive & ~is_eos
        finished = int((~is_alive).sum())
        if t == max_new_tokens - 1 or finished == len(rows):
            break
        if 4 * finished >= len(rows):
            # finished rows leave the cache once they are a quarter of it: each decode step
            # they stay is waste, and one compaction costs about one step
            keep = is_alive.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            rows, is_alive, token = rows[keep], is_alive[keep], token[keep]
            attention, next_position = attention[keep], next_position[keep]
        attention = torch.cat([attention, attention.new_ones(len(rows), 1)], dim=1)
        out = model(
            input_ids=token[:, None],
            attention_mask=attention,
            position_ids=next_position[:, None],
            use_cache=True,
            **{cache_arg: cache},
        )
        logits = out.logits[:, -1]
        next_position = next_position + 1
    return tokens, lengths, entropy, is_stopped


def _stop_hits(stop: StopStrings, tokens: Tensor, rows: Tensor, is_live: Tensor) -> Tensor:
    """Per cache row: live rows whose completion so far (tokens: (N, t)) now holds a stop
    string; only those rows' tails are decoded."""
    hits = torch.zeros_like(is_live)
    if bool(is_live.any()):
        hits[is_live] = stop.hits(tokens[rows[is_live]])
    return hits


def decode_completions(tokenizer: Any, rollout: Rollout) -> list[str]:
    """Completion texts without padding or special tokens."""
    return list(tokenizer.batch_decode(completion_token_ids(rollout), skip_special_tokens=True))


def completion_token_ids(rollout: Rollout) -> list[list[int]]:
    """Each completion's token ids without padding, its EOS kept (TRL's `completion_ids`)."""
    return [
        ids[:n].tolist()
        for ids, n in zip(rollout.completion_ids, rollout.lengths.tolist(), strict=True)
    ]
