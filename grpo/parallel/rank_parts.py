"""What each rank contributes to the step's report, and the whole step from the parts.

Every rank generates, scores and trains its own contiguous slice of the step's groups;
the step's scalars and GroupReports are computed from the union of the slices (rank order
is group order), so one process and several report the same step. Phase timings are the
max over ranks: the step waits for its slowest rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from grpo.parallel.ranks import Ranks
from grpo.report import GroupReport
from grpo.report.metrics import group_scalars, length_scalars, reward_scalars
from grpo.report.timing import StepClock
from grpo.report.tool_metrics import sum_counts, tool_counts, tool_scalars
from grpo.rewards.batch import Scores
from grpo.rollout.dynamic_sampling import Batch


@dataclass(frozen=True)
class RankPart:
    """One rank's groups of the step, and what its clock measured."""

    rewards: Tensor  # (b, G)
    scores: Scores
    passes: list[bool]  # b x G, group-major
    lengths: Tensor  # (b x G,)
    is_truncated: Tensor  # (b x G,)
    entropy: tuple[float, float]  # sum and count over the completions' tokens
    groups: list[GroupReport]
    timings: dict[str, float]  # time/<phase>, time/step, time/reward/<label>, time/tools
    truncated_prompts: int
    tool_counts: dict[str, float] = field(default_factory=dict)
    """grpo/report/tool_metrics.py's sums over the part's trajectories; {} without tools."""

    @property
    def mean_entropy(self) -> float:
        return self.entropy[0] / self.entropy[1] if self.entropy[1] else 0.0


def rank_part(
    batch: Batch,
    groups: list[GroupReport],
    clock: StepClock,
    passes: list[bool],
    truncated_prompts: int,
) -> RankPart:
    """This rank's part of the step (on the CPU): its kept groups, `passes` of each
    completion, and the clock's phase timings."""
    rollout, entropy = batch.rollout, batch.rollout.entropy
    if entropy is None:
        raise ValueError("rank_part needs the rollout's entropies (the update's, under vLLM)")
    mask = rollout.model_token_mask.bool()  # tool-result tokens are no sampling entropy
    timings = clock.scalars(num_tokens=0)
    del timings["tokens_per_second"]  # of the whole step: from all ranks' tokens
    timings.update({f"time/{name}": s for name, s in clock.seconds.items() if "/" in name})
    if rollout.trajectories is not None:
        timings["time/tools"] = clock.seconds.get("tools", 0.0)
    return detached(
        RankPart(
            rewards=batch.rewards,
            scores=batch.scores,
            passes=passes,
            lengths=rollout.model_token_mask.sum(dim=1),  # model tokens: tool results left out
            is_truncated=rollout.is_truncated,
            entropy=(float(entropy[mask].sum()), float(mask.sum())),
            groups=groups,
            timings=timings,
            truncated_prompts=truncated_prompts,
            tool_counts=tool_counts(rollout.trajectories),
        )
    )


def step_scalars(
    whole: RankPart, metrics: dict[str, float], *, beta: float, learning_rate: float
) -> dict[str, float]:
    """The step's scalars from every rank's groups (`whole`), the update's `metrics` (summed
    over ranks), and the beta and learning rate the step trained with."""
    rewards, step_time = whole.rewards, whole.timings["time/step"]
    return {
        **reward_scalars(rewards, whole.scores),
        **group_scalars(rewards, torch.tensor(whole.passes).view_as(rewards)),
        **length_scalars(whole.lengths, whole.is_truncated),
        **metrics,
        "kl": metrics.get("kl", 0.0),
        "beta": beta,
        "entropy": whole.mean_entropy,
        "learning_rate": learning_rate,
        "prompts/truncated": float(whole.truncated_prompts),
        **tool_scalars(whole.tool_counts),
        **whole.timings,
        "tokens_per_second": float(whole.lengths.sum()) / step_time if step_time > 0 else 0.0,
    }


def whole_step(ranks: Ranks, part: RankPart) -> RankPart | None:
    """The union of every rank's part on rank 0, the only rank that reports; None on the
    others (the part itself on one process)."""
    if not ranks.is_distributed:
        return part
    parts: list[RankPart] | None = ranks.gather_to_main(part)
    if parts is None:
        return None
    timings: dict[str, float] = {}
    for p in parts:
        for key, value in p.timings.items():
            timings[key] = max(timings.get(key, 0.0), value)
    return RankPart(
        rewards=torch.cat([p.rewards for p in parts]),
        scores={label: [v for p in parts for v in p.scores[label]] for label in part.scores},
        passes=[v for p in parts for v in p.passes],
        lengths=torch.cat([p.lengths for p in parts]),
        is_truncated=torch.cat([p.is_truncated for p in parts]),
        entropy=(sum(p.entropy[0] for p in parts), sum(p.entropy[1] for p in parts)),
        groups=[g for p in parts for g in p.groups],
        timings=timings,
        truncated_prompts=sum(p.truncated_prompts for p in parts),
        tool_counts=sum_counts([p.tool_counts for p in parts]),
    )


def detached(part: RankPart) -> RankPart:
    """The part on the CPU, ready to pickle to the other ranks."""
    return replace(
        part,
        rewards=part.rewards.detach().cpu(),
        lengths=part.lengths.detach().cpu(),
        is_truncated=part.is_truncated.detach().cpu(),
    )
