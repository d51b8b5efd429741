"""Score one step's completions with every reward entry of a spec, each kind its own way.

Each entry's kind (grpo/rewards/registry.py; what a kind is: kind.py) prepares it once per
run in `Rewarder` (a loaded function, a loaded classifier, the checked endpoint host) and
scores it every step, a `multi` entry last, from the others' scores. Scores stay apart,
unweighted, keyed by label, None where a function does not apply; a completion no function
applies to is an error. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from grpo.failures import NoApplicableReward, RewardFunctionError
from grpo.rewards.batch import Notes, RewardBatch, Scores
from grpo.rewards.kind import RunFacts
from grpo.rewards.python import function_scorer
from grpo.rewards.registry import kind_of
from grpo.rewards.trl_call import RewardFunction, metric_means
from grpo.spec.rewards import MultiReward, PythonReward, RewardSpec
from grpo.spec.sources import LocalRoots


@dataclass
class RewardOutcome:
    """Scores of a step, seconds spent per label, and notes by completion index (what a
    function said about a completion, e.g. the sandbox limit its program hit)."""

    scores: Scores
    seconds: dict[str, float]
    notes: dict[int, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    """What functions logged with log_metric: `rewards/<label>/<name>`, the step's mean."""
    extras: dict[int, dict[str, Any]] = field(default_factory=dict)
    """What functions logged with log_extra, by completion index: column -> value."""

    def add(self, label: str, said: Notes) -> None:
        """What the function `label` said while scoring: notes, scalars and columns."""
        for i, note in said.items():
            line = f"{label}: {note}"
            self.notes[i] = f"{self.notes[i]}; {line}" if i in self.notes else line
        self.metrics.update(metric_means(said.metrics, label))
        for column, values in said.extras.items():
            for i, value in enumerate(values):
                self.extras.setdefault(i, {})[column] = value


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
        functions: Mapping[str, RewardFunction] | None = None,
        plugin_dirs: Sequence[Path] = (),
    ) -> None:
        """`reward_hosts`: allowed endpoint hosts; `token_envs`: token variables the
        operator listed (grpo/spec/token_env.py); `model_roots`: where local reward models may
        lie (None trusts the caller, as grpo.models.loading does); `functions`: callables
        given in this process (the Python API), used by the `python` entries naming them
        instead of an installed entry point; `plugin_dirs`: folders whose files' functions
        `python` entries may name (grpo/spec/plugins.py)."""
        self.rewards = tuple(rewards)
        run = RunFacts(
            cache_dir=cache_dir or Path.home() / ".cache" / "grpo",
            device=device,
            reward_hosts=tuple(reward_hosts),
            token_envs=tuple(token_envs),
            model_roots=model_roots,
            plugin_dirs=tuple(plugin_dirs),
        )
        given = dict(functions or {})
        self._scorers = {
            entry.label: function_scorer(given[entry.function])
            if isinstance(entry, PythonReward) and entry.function in given
            else kind_of(entry).prepare(entry, run)
            for entry in self.rewards
        }

    @property
    def weights(self) -> dict[str, float]:
        return {entry.label: entry.weight for entry in self.rewards}

    def score(self, batch: RewardBatch) -> RewardOutcome:
        """Every entry's scores of the batch, timed per label; raises when one fails. Plain
        scorers run one after the other, then the async ones all at once (as TRL gathers
        its async reward functions)."""
        said = {entry.label: Notes() for entry in self.rewards}
        scores: Scores = {}
        seconds: dict[str, float] = {}
        pending: list[tuple[str, Awaitable[list[float | None]]]] = []
        try:
            for entry in self.rewards:
                if isinstance(entry, MultiReward):
                    continue  # once the scores it combines are in
                started = time.perf_counter()
                with reward_errors(entry.label, batch):
                    result = self._scorers[entry.label](batch, said[entry.label])
                if inspect.isawaitable(result):
                    pending.append((entry.label, result))
                    continue
                scores[entry.label] = result
                seconds[entry.label] = time.perf_counter() - started
        except BaseException:
            for _, work in pending:  # a plain scorer failed: the async ones never start
                if inspect.iscoroutine(work):
                    work.close()
            raise
        for label, (values, spent) in self._awaited(pending, batch).items():
            scores[label], seconds[label] = values, spent
        self._combine(batch, scores, seconds, said)
        outcome = RewardOutcome(
            scores={entry.label: scores[entry.label] for entry in self.rewards}, seconds=seconds
        )
        for label, notes in said.items():
            outcome.add(label, notes)
        require_applicable(outcome.scores)
        return outcome

    def _combine(
        self, batch: RewardBatch, scores: Scores, seconds: dict[str, float], said: dict[str, Notes]
    ) -> None:
        """The `multi` entries' scores, from the others' (grpo/rewards/multi.py)."""
        combined = replace(batch, scores=dict(scores))
        for entry in self.rewards:
            if isinstance(entry, MultiReward):
                started = time.perf_counter()
                with reward_errors(entry.label, batch):
                    result = self._scorers[entry.label](combined, said[entry.label])
                scores[entry.label] = cast(list[float | None], result)  # a plain scorer
                seconds[entry.label] = time.perf_counter() - started

    def score_one(self, label: str, batch: RewardBatch) -> RewardOutcome:
        """Only entry `label`'s scores of the batch, with its seconds and what it said, as
        `score` gets them (a reward test runs each function on its own, so one failing
        leaves the others' scores); raises RewardFunctionError naming it."""
        notes = Notes()
        started = time.perf_counter()
        with reward_errors(label, batch):
            result = self._scorers[label](batch, notes)
        if inspect.isawaitable(result):
            result, _ = self._awaited([(label, result)], batch)[label]
        outcome = RewardOutcome(
            scores={label: result}, seconds={label: time.perf_counter() - started}
        )
        outcome.add(label, notes)
        return outcome

    def _awaited(
        self, pending: list[tuple[str, Awaitable[list[float | None]]]], batch: RewardBatch
    ) -> dict[str, tuple[list[float | None], float]]:
        try:
            return run_concurrently(pending)
        except RewardFunctionError as exc:
            placed = located(exc, batch)
            if placed is exc:
                raise
            raise placed from exc


@contextmanager
def reward_errors(label: str, batch: RewardBatch | None = None) -> Iterator[None]:
    """Any failure of a scorer as a RewardFunctionError naming its label (and, given the
    batch, the step and the prompt)."""
    try:
        yield
    except RewardFunctionError as exc:
        placed = exc if batch is None else located(exc, batch)
        if placed is exc:
            raise
        raise placed from exc
    except Exception as exc:  # noqa: BLE001 - any failure is reported with its function
        failure = RewardFunctionError(label, None, exc)
        raise (failure if batch is None else located(failure, batch)) from exc


def located(exc: RewardFunctionError, batch: RewardBatch) -> RewardFunctionError:
    """The failure naming the batch's step and the prompt of the completion at fault."""
    g = batch.num_generations
    prompt_id = None if exc.index is None else batch.examples[exc.index // g].id
    return exc.located(step=batch.step, prompt_id=prompt_id)


def run_concurrently(
    pending: list[tuple[str, Awaitable[list[float | None]]]],
) -> dict[str, tuple[list[float | None], float]]:
    """Await the async scorers together on a fresh event loop in a thread of its own (the
    caller may itself be inside a running loop, a notebook's); scores and seconds by label."""
    if not pending:
        return {}

    async def timed(
        label: str, work: Awaitable[list[float | None]]
    ) -> tuple[list[float | None], float]:
        started = time.perf_counter()
        with reward_errors(label):
            values = await work
        return values, time.perf_counter() - started

    async def gather() -> list[tuple[list[float | None], float]]:
        return await asyncio.gather(*(timed(label, work) for label, work in pending))

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="grpo-rewards") as pool:
        results = pool.submit(asyncio.run, gather()).result()
    return {label: result for (label, _), result in zip(pending, results, strict=True)}


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
