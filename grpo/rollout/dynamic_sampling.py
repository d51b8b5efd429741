"""Dynamic sampling (DAPO, Yu et al. 2025, arXiv:2503.14476): keep only groups with signal.

A group whose rewards are all equal gets advantage 0 everywhere and adds nothing to the
policy gradient. With dynamic sampling on, such groups are dropped and more prompts are
sampled, round after round, until the step holds `target` groups with a nonzero advantage
or `max_rounds` rounds have run; then the step trains on what it has. Dropped groups are
returned too, so the report can show them. Knows nothing of models or rewards' meaning.

On several ranks every rank generates and scores its slice of a round's groups, then the
round is gathered whole on every rank (`whole_round`), so the decisions (which groups are
kept, when the step has enough) are one process's, on every rank; the kept groups (and the
dropped ones, for the report) are then dealt out again as contiguous slices
(`rank_share`). A group's samples depend only on (seed, step, round, position), so one
process and several keep the same groups in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

import torch
from torch import Tensor

from grpo.data.example import Example
from grpo.parallel.ranks import SINGLE, Ranks
from grpo.report.timing import StepClock
from grpo.rewards.batch import Scores
from grpo.rollout.rollout import Rollout, concat_rollouts
from grpo.spec import JobSpec

V = TypeVar("V")


@dataclass(frozen=True)
class Batch:
    """B groups of a generation round, scored: row b of rewards is group b."""

    examples: list[Example]
    prompts: list[str]
    rollout: Rollout
    texts: list[str]
    scores: Scores
    """Per-function scores of the B x G completions (None: not applicable), by label."""
    rewards: Tensor  # (B, G)
    advantages: Tensor  # (B, G)
    notes: dict[int, str] = field(default_factory=dict)
    """What reward functions noted about completions, by completion index (B x G)."""
    extras: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Columns reward functions logged (log_extra), by completion index (B x G)."""

    def select(self, groups: list[int]) -> Batch:
        g = self.rollout.num_generations
        rows = [b * g + i for b in groups for i in range(g)]
        index = torch.tensor(groups, dtype=torch.long)
        return Batch(
            [self.examples[b] for b in groups],
            [self.prompts[b] for b in groups],
            self.rollout.select_groups(index.to(self.rollout.prompt_ids.device)),
            [self.texts[i] for i in rows],
            {key: [values[i] for i in rows] for key, values in self.scores.items()},
            self.rewards[index],
            self.advantages[index],
            {new: self.notes[old] for new, old in enumerate(rows) if old in self.notes},
            {new: self.extras[old] for new, old in enumerate(rows) if old in self.extras},
        )


@dataclass(frozen=True)
class Filled:
    kept: Batch
    """The groups the step trains on."""
    dropped: Batch | None
    """Zero-signal groups left out of training, in sampling order."""
    rounds: int
    """Generation rounds run, the first included."""
    first: int = 0
    """Position in the step of kept's first group (this rank's share on several ranks)."""


def has_signal(advantages: Tensor) -> Tensor:
    """(B, G) -> (B,) True where some completion's advantage is nonzero (DAPO keeps
    0 < #correct < G; 'nonzero advantage' says the same for any reward and aggregation)."""
    return advantages.ne(0).any(dim=1)


def fill_with_signal(
    sample_round: Callable[[int], Batch],
    *,
    target: int,
    max_rounds: int,
    pad_token_id: int,
    ranks: Ranks = SINGLE,
) -> Filled:
    """Rounds 0, 1, ... of sample_round until `target` groups have signal or max_rounds ran,
    decided on the whole rounds (every rank's slice of each, gathered).

    Surplus groups with signal from the last round are discarded (DAPO does the same). If
    no round found any signal, the first round's groups are trained on as they are.
    """
    kept: list[Batch] = []
    dropped: list[Batch] = []
    found, rounds, first = 0, 0, None
    while found < target and rounds < max_rounds:
        batch = whole_round(ranks, sample_round(rounds), pad_token_id=pad_token_id)
        first = batch if first is None else first
        rounds += 1
        signal = has_signal(batch.advantages).tolist()
        with_signal = [b for b, s in enumerate(signal) if s][: target - found]
        kept.append(batch.select(with_signal))
        dropped.append(batch.select([b for b, s in enumerate(signal) if not s]))
        found += len(with_signal)
    trained = concat_batches(kept, pad_token_id=pad_token_id)
    if trained is None:
        assert first is not None  # max_rounds >= 1
        return Filled(first, None, rounds)
    return Filled(trained, concat_batches(dropped, pad_token_id=pad_token_id), rounds)


def whole_round(ranks: Ranks, batch: Batch, *, pad_token_id: int) -> Batch:
    """Every rank's slice of a round, in rank (= position) order, on every rank."""
    if not ranks.is_distributed:
        return batch
    device = batch.rollout.completion_ids.device
    parts = ranks.gather_all(_moved(batch, torch.device("cpu")))
    whole = concat_batches(parts, pad_token_id=pad_token_id)
    assert whole is not None  # prompts_per_step >= num_processes: no rank has no group
    return _moved(whole, device)


def rank_share(ranks: Ranks, filled: Filled) -> Filled:
    """This rank's contiguous slice of the kept groups; the dropped ones (only reported)
    all on the last rank, so the gathered report lists kept then dropped, as one process."""
    if not ranks.is_distributed:
        return filled
    mine = ranks.groups(len(filled.kept.examples))
    dropped = filled.dropped if ranks.rank == ranks.world_size - 1 else None
    return Filled(filled.kept.select(list(mine)), dropped, filled.rounds, first=mine.start)


def _moved(batch: Batch, device: torch.device) -> Batch:
    rollout = batch.rollout
    moved = {
        f.name: value.to(device)
        for f in fields(rollout)
        if (value := getattr(rollout, f.name)) is not None  # optional per-token fields
    }
    return replace(batch, rollout=replace(rollout, **moved))


def concat_batches(batches: list[Batch], *, pad_token_id: int) -> Batch | None:
    """The groups of all batches in order; None when they hold no group."""
    batches = [b for b in batches if b.examples]
    if not batches:
        return None
    return Batch(
        [e for b in batches for e in b.examples],
        [p for b in batches for p in b.prompts],
        concat_rollouts([b.rollout for b in batches], pad_token_id=pad_token_id),
        [t for b in batches for t in b.texts],
        {key: [v for b in batches for v in b.scores[key]] for key in batches[0].scores},
        torch.cat([b.rewards for b in batches]),
        torch.cat([b.advantages for b in batches]),
        _concat_by_completion(batches, lambda b: b.notes),
        _concat_by_completion(batches, lambda b: b.extras),
    )


def _concat_by_completion(
    batches: list[Batch], part: Callable[[Batch], dict[int, V]]
) -> dict[int, V]:
    """A per-completion dict of every batch, renumbered for the concatenation."""
    joined: dict[int, V] = {}
    offset = 0
    for batch in batches:
        joined.update({offset + i: value for i, value in part(batch).items()})
        offset += len(batch.texts)
    return joined


def dynamic_scalars(
    spec: JobSpec, step: int, filled: Filled, clock: StepClock, *, log: Callable[[str, str], None]
) -> dict[str, float]:
    """dynamic_sampling/*: rounds, dropped groups, and what the extra rounds cost."""
    if not spec.dynamic_sampling.enabled:
        return {}
    trained = int(has_signal(filled.kept.advantages).sum())
    if trained < spec.prompts_per_step:
        log(
            "warning",
            f"step {step}: {trained} of {spec.prompts_per_step} groups with signal "
            f"after {filled.rounds} rounds; training on those",
        )
    dropped = 0 if filled.dropped is None else len(filled.dropped.examples)
    return {
        "dynamic_sampling/rounds": float(filled.rounds),
        "dynamic_sampling/dropped_groups": float(dropped),
        "dynamic_sampling/signal_groups": float(trained),
        "dynamic_sampling/extra_completions": float(
            (filled.rounds - 1) * spec.completions_per_step
        ),
        "time/dynamic_sampling": clock.seconds.get("dynamic_sampling", 0.0),
    }
