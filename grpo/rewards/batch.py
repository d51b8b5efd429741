"""What every reward kind scores: one step's batch of completions, and the scores it gives.

The shared types of grpo/rewards/: each kind's module reads a RewardBatch and returns one
score per completion; scoring.py keeps them apart, keyed by label. Knows nothing of how a
kind scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from grpo.data.example import Example

Scores = dict[str, list[float | None]]
"""Unweighted score of every completion (group-major, B x G), keyed by reward label."""
T = TypeVar("T")


@dataclass(frozen=True)
class TrainerState:
    """Where training stands, read-only, as TRL hands `trainer_state` to reward functions
    (its TrainerState's names): for schedules that change a reward over training."""

    global_step: int
    """Optimizer steps done before this one (0 while the first step is scored), as TRL."""
    max_steps: int
    epoch: float
    """Passes over the training prompts done when this step's prompts were drawn (fractional)."""

    @classmethod
    def at_step(
        cls, step: int, *, max_steps: int, prompts_per_step: int, num_examples: int
    ) -> TrainerState:
        """While step `step` (from 1) is scored, of `max_steps`, drawing `prompts_per_step`
        of `num_examples` training prompts a step: what training and a replay both hand."""
        epoch = (step - 1) * prompts_per_step / max(1, num_examples)
        return cls(global_step=step - 1, max_steps=max_steps, epoch=epoch)


class Notes(dict[int, str]):
    """What a function said while scoring a step: notes by completion index (the dict), the
    scalars it logged (`log_metric`, each name's values) and the columns it added
    (`log_extra`, one value per completion)."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics: dict[str, list[float]] = {}
        self.extras: dict[str, list[Any]] = {}


@dataclass(frozen=True)
class RewardBatch:
    """What reward functions may look at for one step: B groups of G completions."""

    run_id: str
    step: int
    examples: Sequence[Example]  # (B,)
    prompts: Sequence[str]  # (B,) as the policy saw them
    completions: Sequence[str]  # (B * G,) group-major
    num_tokens: Sequence[int]  # (B * G,)
    completion_ids: Sequence[Sequence[int]] = ()  # (B * G,) each up to and including EOS
    trainer_state: TrainerState | None = None
    answer_field: str | None = "answer"
    """The records' answer column: reward functions get it under this name and as `answer`
    (None: the records have none, and functions get neither)."""
    trajectories: Sequence[Any] | None = None
    """(B * G,) the tool loop's trajectories (grpo/tools/trajectory.py), when the spec has
    tools: their `messages()` are the completions reward functions see; None otherwise."""
    scores: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    """The scores the spec's other entries gave this batch, by label: what a `multi` entry
    combines (grpo/rewards/multi.py); the Rewarder fills it in before it scores one."""

    @property
    def num_generations(self) -> int:
        return len(self.completions) // max(1, len(self.examples))

    def per_completion(self, values: Sequence[T]) -> list[T]:
        """One value per group repeated for each of its G completions."""
        return [v for v in values for _ in range(self.num_generations)]

    def trl_prompts_and_completions(self) -> tuple[list[Any], list[Any]]:
        """Per completion, as TRL hands them to reward functions: the record's prompt, and
        the completion text; for chat-message prompts the messages, and the completion as
        one assistant message `[{"role": "assistant", "content": text}]`."""
        prompts = self.per_completion([e.prompt for e in self.examples])
        if self.trajectories is not None:  # TRL: a tool trajectory is a list of messages
            return prompts, [t.messages() for t in self.trajectories]
        if not any(isinstance(e.prompt, list) for e in self.examples):
            return prompts, list(self.completions)
        return prompts, [[{"role": "assistant", "content": c}] for c in self.completions]

    def columns(self) -> dict[str, list[Any]]:
        """Every record column but the prompt under its own name, one entry per completion
        (TRL's kwargs): the answer column under its name (`solution`) and as `answer`."""
        columns: dict[str, list[Any]] = {}
        if self.answer_field is not None:
            answers = self.per_completion([e.answer for e in self.examples])
            columns = {"answer": answers, self.answer_field: answers}
        for key in sorted({k for e in self.examples for k in e.data} - set(columns)):
            columns[key] = self.per_completion([e.data.get(key) for e in self.examples])
        return columns

    def trajectory_columns(self) -> dict[str, list[Any]]:
        """With tools: `tool_calls` ([{name, arguments, error}] per completion),
        `tool_results` ([{name, content, is_error}]) and, with an environment, TRL's
        `environments` (each trajectory's instance); {} without tools."""
        if self.trajectories is None:
            return {}
        columns: dict[str, list[Any]] = {
            "tool_calls": [
                [{"name": c.name, "arguments": c.arguments, "error": c.error} for c in t.calls]
                for t in self.trajectories
            ],
            "tool_results": [
                [{"name": r.name, "content": r.content, "is_error": r.is_error} for r in t.results]
                for t in self.trajectories
            ],
        }
        if any(t.environment is not None for t in self.trajectories):
            columns["environments"] = [t.environment for t in self.trajectories]
        return columns
