"""Score one step's completions with every reward entry of a spec, each kind its own way.

Each entry's kind (grpo/rewards/registry.py; what a kind is: kind.py) prepares it once per
run in `Rewarder` (a loaded function, a loaded classifier, the checked endpoint host) and
scores it every step. Scores stay apart, unweighted, keyed by label, None where a function
does not apply; a completion no function applies to is an error. Knows nothing of HTTP
servers, SQL or Celery.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo.failures import NoApplicableReward, RewardFunctionError
from grpo.rewards.batch import RewardBatch, Scores
from grpo.rewards.kind import RunFacts
from grpo.rewards.registry import kind_of
from grpo.spec.rewards import RewardSpec
from grpo.spec.sources import LocalRoots


@dataclass
class RewardOutcome:
    """Scores of a step, seconds spent per label, and notes by completion index (what a
    function said about a completion, e.g. the sandbox limit its program hit)."""

    scores: Scores
    seconds: dict[str, float]
    notes: dict[int, str] = field(default_factory=dict)


class Rewarder:
    """The reward entries of a run, prepared once: `score` runs them on each step's batch."""

    def __init__(
        self,
        rewards: Sequence[RewardSpec],
        *,
        device: Any = "cpu",
        reward_hosts: Sequence[str] = (),
        token_envs: Sequence[str] = (),
        cache_dir: Path | None = None,
        model_roots: LocalRoots | None = None,
    ) -> None:
        """`reward_hosts`: allowed endpoint hosts; `token_envs`: token variables the
        operator listed (grpo/spec/token_env.py); `model_roots`: where local reward models may
        lie (None trusts the caller, as grpo.models.loading does)."""
        self.rewards = tuple(rewards)
        run = RunFacts(
            cache_dir=cache_dir or Path.home() / ".cache" / "grpo",
            device=device,
            reward_hosts=tuple(reward_hosts),
            token_envs=tuple(token_envs),
            model_roots=model_roots,
        )
        self._scorers = {entry.label: kind_of(entry).prepare(entry, run) for entry in self.rewards}

    @property
    def weights(self) -> dict[str, float]:
        return {entry.label: entry.weight for entry in self.rewards}

    def score(self, batch: RewardBatch) -> RewardOutcome:
        """Every entry's scores of the batch, timed per label; raises when one fails."""
        outcome = RewardOutcome(scores={}, seconds={})
        for entry in self.rewards:
            started = time.perf_counter()
            try:
                notes: dict[int, str] = {}
                outcome.scores[entry.label] = self._scorers[entry.label](batch, notes)
            except RewardFunctionError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure is reported with its function
                raise RewardFunctionError(entry.label, None, exc) from exc
            outcome.seconds[entry.label] = time.perf_counter() - started
            for i, note in notes.items():
                said = f"{entry.label}: {note}"
                outcome.notes[i] = f"{outcome.notes[i]}; {said}" if i in outcome.notes else said
        require_applicable(outcome.scores)
        return outcome


def notes_summary(notes: dict[int, str], batch: RewardBatch) -> str:
    """One log line for a step's reward notes: the first three, each naming its completion."""
    g = batch.num_generations
    said = [
        f"prompt {batch.examples[i // g].id!r} completion {i % g}: {n}" for i, n in notes.items()
    ]
    more = f" (and {len(said) - 3} more)" if len(said) > 3 else ""
    return f"step {batch.step} rewards: {'; '.join(said[:3])}{more}"


def require_applicable(scores: Scores) -> None:
    """Raise NoApplicableReward for the first completion every function returned None for."""
    columns = list(scores.values())
    count = len(columns[0]) if columns else 0
    for i in range(count):
        if all(column[i] is None for column in columns):
            labels = ", ".join(scores)
            raise NoApplicableReward(labels, i, ValueError("no applicable reward"))
