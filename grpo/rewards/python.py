"""`python` rewards: functions that packages installed on the worker register under the
entry-point group `grpo.rewards`, called with TRL's reward-function signature.

Only installed entry points are loadable: a spec names one, it cannot name a module or a
path, and no code that arrived over HTTP runs. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

from grpo.rewards.batch import RewardBatch
from grpo.rewards.kind import Refusal, RewardKind, RunFacts, Scorer, ServerFacts
from grpo.spec.rewards import ENTRY_POINT_GROUP, PythonReward

RewardFunction = Callable[..., Sequence[float | None]]


def installed_reward_functions() -> list[str]:
    """Names of the entry points in group `grpo.rewards` of this environment."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def load_reward_function(name: str) -> RewardFunction:
    """The function registered as `name` in group `grpo.rewards`; ValueError when absent."""
    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        installed = ", ".join(installed_reward_functions()) or "none"
        raise ValueError(
            f"no reward function {name!r} is installed in entry-point group "
            f"{ENTRY_POINT_GROUP!r} on this worker (installed: {installed})"
        )
    function = next(iter(found)).load()
    if not callable(function):
        raise ValueError(f"entry point {name!r} of group {ENTRY_POINT_GROUP!r} is not callable")
    return function  # type: ignore[no-any-return]


def call_reward_function(
    function: RewardFunction,
    *,
    prompts: Sequence[Any],
    completions: Sequence[Any],
    columns: dict[str, list[Any]],
) -> list[float | None]:
    """fn(prompts, completions, **columns) as TRL calls it: one entry per completion in every
    list; the answer must be a list of the same length holding numbers or None."""
    values = function(prompts=list(prompts), completions=list(completions), **columns)
    return checked_scores(values, expected=len(completions))


def checked_scores(values: Any, *, expected: int) -> list[float | None]:
    """The values as floats (None kept); ValueError saying what is wrong otherwise."""
    if not isinstance(values, list | tuple):
        raise ValueError(f"returned {type(values).__name__}, not a list of numbers or None")
    if len(values) != expected:
        raise ValueError(f"returned {len(values)} values for {expected} completions")
    return [_number_or_none(v, where=f"value {i}") for i, v in enumerate(values)]


def _number_or_none(value: Any, *, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where} is {value!r}, not a number or None")
    if not math.isfinite(float(value)):
        raise ValueError(f"{where} is {value!r}, not a finite number")
    return float(value)


def check_installed(entry: PythonReward, server: ServerFacts) -> Refusal | None:
    """The function must be installed here too: the API and the workers share packages."""
    installed = installed_reward_functions()
    if entry.function in installed:
        return None
    return Refusal(
        "function",
        f"no reward function {entry.function!r} is installed in entry-point group "
        f"{ENTRY_POINT_GROUP!r} (installed: {', '.join(installed) or 'none'})",
    )


def prepare_function(entry: PythonReward, run: RunFacts) -> Scorer:
    """Load the function once; each step calls it as TRL calls reward functions."""
    function = load_reward_function(entry.function)

    def scorer(batch: RewardBatch, notes: dict[int, str]) -> list[float | None]:
        prompts, completions = batch.trl_prompts_and_completions()
        return call_reward_function(
            function,
            prompts=prompts,
            completions=completions,
            columns={**batch.columns(), **batch.trajectory_columns()},
        )

    return scorer


PYTHON = RewardKind("python", check_installed, prepare_function)
