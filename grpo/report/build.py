"""Turn one step's tensors into the plain StepReport the outside world receives.

Every group keeps its prompt, rewards and advantages; the first `keep` groups also keep
their completions (text, per-function rewards, per-token KL and each token's piece of
text). Knows nothing of HTTP or SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from grpo.models.detokenizer import token_pieces
from grpo.report import (
    ADVANTAGE_BIN_EDGES,
    GROUP_REWARD_STD_BIN_EDGES,
    REWARD_BIN_EDGES,
    CompletionReport,
    GroupReport,
    StepReport,
    histogram,
)
from grpo.rollout.dynamic_sampling import Batch
from grpo.rollout.rollout import Rollout
from grpo.rollout.stopping import first_stop


@dataclass(frozen=True)
class GroupsShown:
    """How a batch's groups are shown: the tokenizer and end tokens and strings that name
    how each completion ended, and how many groups keep their completions (the first)."""

    tokenizer: Any
    eos_token_ids: Sequence[int]
    keep: int
    stops: Sequence[str] = ()


def build_groups(
    batch: Batch,
    advantages: Tensor,
    token_kls: Tensor | None,
    passes: Sequence[bool],
    shown: GroupsShown,
    *,
    first_index: int = 0,
    is_dropped: bool = False,
) -> list[GroupReport]:
    """One GroupReport per prompt of `batch`, with `advantages` (B, G) (the batch's own, or
    the step's recomputed over its kept groups); completions only for the first
    `shown.keep` groups. `passes` is one bool per completion (group-major), by
    grpo/report/outcome.py's rule."""
    rollout = batch.rollout
    g = rollout.num_generations
    reward_rows, advantage_rows = batch.rewards.tolist(), advantages.tolist()
    rows = _Rows.of(rollout, token_kls, num_rows=min(shown.keep, len(batch.examples)) * g)
    groups = []
    for b, example in enumerate(batch.examples):
        completions = None
        if b < shown.keep:
            completions = [
                _completion(i, batch, rows, shown, reward_rows[b][i % g], advantage_rows[b][i % g])
                for i in range(b * g, (b + 1) * g)
            ]
        groups.append(
            GroupReport(
                index=first_index + b,
                prompt_id=example.id,
                prompt=batch.prompts[b],
                answer=example.answer,
                rewards=reward_rows[b],
                advantages=advantage_rows[b],
                completions=completions,
                is_dropped=is_dropped,
                passes=list(passes[b * g : (b + 1) * g]),
            )
        )
    return groups


@dataclass(frozen=True)
class _Rows:
    """The first rows of a rollout as Python lists, each converted once for the whole batch
    rather than once per completion (a completion's report reads all of them)."""

    lengths: list[int]
    ids: list[list[int]]  # each cut to its length
    is_truncated: list[bool]
    token_kls: list[list[float]] | None  # each cut to its length
    model_masks: list[list[int]] | None = None  # each cut to its length; None: no tools
    trajectories: tuple[Any, ...] | None = None
    versions: list[int] | None = None  # the policy version that sampled each
    sampler_logps: list[list[float]] | None = None  # each cut to its length; None: not reported

    @classmethod
    def of(cls, rollout: Rollout, token_kls: Tensor | None, *, num_rows: int) -> _Rows:
        lengths = rollout.lengths[:num_rows].tolist()

        def cut(rows: Tensor | None) -> list[list[Any]] | None:
            """The first num_rows rows, each cut to its completion's length."""
            if rows is None:
                return None
            return [r[:n] for r, n in zip(rows[:num_rows].tolist(), lengths, strict=True)]

        sampler = rollout.sampling_logps
        return cls(
            lengths=lengths,
            ids=cut(rollout.completion_ids) or [],
            is_truncated=rollout.is_truncated[:num_rows].tolist(),
            token_kls=cut(token_kls),
            model_masks=cut(rollout.model_mask),
            trajectories=None if rollout.trajectories is None else rollout.trajectories[:num_rows],
            versions=None
            if rollout.policy_version is None
            else rollout.policy_version[:num_rows].tolist(),
            sampler_logps=cut(None if sampler is None else sampler.float()),
        )


def _completion(
    i: int, batch: Batch, rows: _Rows, shown: GroupsShown, reward: float, advantage: float
) -> CompletionReport:
    texts, tokenizer = batch.texts, shown.tokenizer
    extras = dict(batch.extras.get(i) or {}) or None
    length, ids = rows.lengths[i], rows.ids[i]
    kls = rows.token_kls[i] if rows.token_kls is not None else None
    # each token's piece of text, where a view shades tokens by their KL
    pieces = token_pieces(tokenizer, ids, text=texts[i]) if kls is not None else None
    return CompletionReport(
        text=texts[i],
        num_tokens=length,
        is_truncated=rows.is_truncated[i],
        rewards={name: values[i] for name, values in batch.scores.items()},
        note=batch.notes.get(i),
        extras=extras,
        reward=reward,
        advantage=advantage,
        kl=sum(kls) / max(1, len(kls)) if kls else 0.0,
        token_kls=kls,
        tokens=pieces,
        trajectory=None if rows.trajectories is None else rows.trajectories[i].record(),
        model_mask=None if rows.model_masks is None or kls is None else rows.model_masks[i],
        policy_version=None if rows.versions is None else rows.versions[i],
        sampler_logps=None if rows.sampler_logps is None or kls is None else rows.sampler_logps[i],
        **finish_fields(
            ids,
            eos_token_ids=shown.eos_token_ids,
            tokenizer=tokenizer,
            text=texts[i],
            stops=shown.stops,
        ),
    )


def finish_fields(
    ids: list[int],
    *,
    eos_token_ids: Sequence[int],
    tokenizer: Any,
    text: str = "",
    stops: Sequence[str] = (),
) -> dict[str, Any]:
    """finish_reason, stop and stop_token_id of one completion's token ids: it ended on an
    end-of-sequence id (which one: a model may have several), on one of the spec's stop
    strings (generation ends at the first, so one in the text is the one), else it ran to
    the limit."""
    if ids and ids[-1] in eos_token_ids:
        token = str(tokenizer.convert_ids_to_tokens(ids[-1]))
        return {"finish_reason": "eos", "stop": token, "stop_token_id": ids[-1]}
    stop = first_stop(text, stops)
    if stop is not None:
        return {"finish_reason": "stop", "stop": stop, "stop_token_id": None}
    return {"finish_reason": "length", "stop": None, "stop_token_id": None}


def build_step_report(
    step: int, total_steps: int, scalars: dict[str, float], groups: list[GroupReport]
) -> StepReport:
    """The step's scalars and groups with the fixed-bin histograms of its trained groups."""
    trained = [group for group in groups if not group.is_dropped]
    advantages = [a for group in trained for a in group.advantages]
    rewards = [r for group in trained for r in group.rewards]
    spreads = [group.reward_std for group in trained]
    return StepReport(
        step=step,
        total_steps=total_steps,
        scalars=scalars,
        groups=groups,
        advantage_histogram=histogram(advantages, ADVANTAGE_BIN_EDGES),
        reward_histogram=histogram(rewards, REWARD_BIN_EDGES),
        group_reward_std_histogram=histogram(spreads, GROUP_REWARD_STD_BIN_EDGES),
    )
