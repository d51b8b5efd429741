"""Score one step's completions with every reward entry of a spec, each kind its own way.

Built-in rules are plain functions (rules.py); plugins, endpoints, reward models and code
sandboxes have their own modules and are prepared once per run by `Rewarder` (a loaded
function, a loaded classifier, the allowed endpoint hosts). Scores stay apart, unweighted,
keyed by label, None where a function does not apply; a completion no function applies to
is an error. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo.failures import NoApplicableReward, RewardFunctionError
from grpo.rewards.batch import RewardBatch, Scores
from grpo.rewards.code import score_code
from grpo.rewards.http import check_host, endpoint_headers, score_with_endpoint
from grpo.rewards.model import RewardModel
from grpo.rewards.python import (
    RewardFunction,
    call_reward_function,
    load_reward_function,
)
from grpo.rewards.rules import RuleReward, score_completions
from grpo.rewards.sandbox import check_sandbox
from grpo.spec.rewards import CodeReward, HttpReward, ModelReward, PythonReward, RewardSpec
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
        self.reward_hosts = tuple(reward_hosts)
        self.token_envs = tuple(token_envs)
        self._functions: dict[str, RewardFunction] = {}
        self._models: dict[str, Any] = {}
        self._cache_dir = cache_dir or Path.home() / ".cache" / "grpo"
        self._model_roots = model_roots
        for entry in self.rewards:
            self._prepare(entry, device=device)

    def _prepare(self, entry: RewardSpec, *, device: Any) -> None:
        match entry:
            case PythonReward():
                self._functions[entry.label] = load_reward_function(entry.function)
            case HttpReward():
                check_host(entry, self.reward_hosts)
                endpoint_headers(entry, self.token_envs)  # fail at start, not at step 1
            case ModelReward():
                self._models[entry.label] = RewardModel(
                    entry, device=device, cache_dir=self._cache_dir, roots=self._model_roots
                )
            case CodeReward():
                check_sandbox()

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
                outcome.scores[entry.label] = self._score(entry, batch, notes)
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

    def _score(
        self, entry: RewardSpec, batch: RewardBatch, notes: dict[int, str]
    ) -> list[float | None]:
        match entry:
            case PythonReward():
                prompts, completions = batch.trl_prompts_and_completions()
                return call_reward_function(
                    self._functions[entry.label],
                    prompts=prompts,
                    completions=completions,
                    columns=batch.columns(),
                )
            case HttpReward():
                return score_with_endpoint(
                    entry, batch, allowed_hosts=self.reward_hosts, token_envs=self.token_envs
                )
            case ModelReward():
                return self._models[entry.label].score(batch)  # type: ignore[no-any-return]
            case CodeReward():
                return score_code(entry, batch, notes)
        return _score_rule(entry, batch, notes)


def _score_rule(entry: RuleReward, batch: RewardBatch, notes: dict[int, str]) -> list[float | None]:
    scores = score_completions(
        batch.completions,
        answers=batch.per_completion([e.answer for e in batch.examples]),
        num_tokens=batch.num_tokens,
        rewards=(entry,),
        notes=notes,
    )
    return list(scores[entry.label])


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
