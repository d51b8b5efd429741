"""Calling a reward function exactly as TRL's GRPOTrainer does (`_calculate_rewards`).

    fn(prompts=..., completions=..., completion_ids=..., trainer_state=...,
       log_metric=..., log_extra=..., **columns) -> list[float | None]

`columns` holds every record column but the prompt, one value per completion, under its
own name (the answer column also as `answer`). `log_metric(name, value)` adds a scalar to
the step (`rewards/<label>/<name>`, the mean of the step's calls, as TRL averages them);
`log_extra(column, values)` adds a column of one value per completion to the group
inspector. An `async def` function is awaited; Rewarder runs a step's async functions
concurrently. Errors name the argument at fault. Knows nothing of entry points or HTTP.
"""

from __future__ import annotations

import inspect
import math
import numbers
import re
from collections.abc import Callable
from typing import Any

from grpo.rewards.batch import Notes, RewardBatch
from grpo.rewards.failure_kinds import BadReturnValue

RewardFunction = Callable[..., Any]
METRIC_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
"""A log_metric name is the last part of `rewards/<label>/<name>`: no slash, no space."""
_RESERVED_METRICS = ("mean", "std")  # rewards/<label>/mean and /std are the scores' own


def trl_kwargs(batch: RewardBatch, notes: Notes) -> dict[str, Any]:
    """The keyword arguments TRL passes, for this batch; logs land in `notes`."""
    prompts, completions = batch.trl_prompts_and_completions()
    count = len(completions)
    return {
        **batch.columns(),
        **batch.trajectory_columns(),  # tool_calls, tool_results, environments (with tools)
        "prompts": prompts,
        "completions": completions,
        "completion_ids": [list(ids) for ids in batch.completion_ids],
        "trainer_state": batch.trainer_state,
        "log_metric": lambda name, value: log_metric(notes, name, value),
        "log_extra": lambda column, values: log_extra(notes, column, values, count=count),
    }


def check_arguments(function: RewardFunction, kwargs: dict[str, Any]) -> None:
    """A parameter the function requires that this run does not pass: ValueError naming it
    and what is passed (a missing dataset column, usually)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # builtins and C functions have no signature to read
        return
    for p in parameters:
        required = p.default is inspect.Parameter.empty
        if (
            required
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in kwargs
        ):
            raise ValueError(
                f"argument {p.name!r} is required by the function but is not a column of "
                f"the dataset (passed: {', '.join(sorted(kwargs))})"
            )


def log_metric(notes: Notes, name: Any, value: Any) -> None:
    """One value of a scalar the function logs this step."""
    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        raise ValueError(f"log_metric name {name!r}: use 1-64 letters, digits, _ . or - (no slash)")
    if name in _RESERVED_METRICS:
        raise ValueError(f"log_metric name {name!r} is the function's own score statistic")
    number = finite_number(value, where=f"log_metric({name!r}) value")
    if number is None:
        raise ValueError(f"log_metric({name!r}) value is None, not a number")
    notes.metrics.setdefault(name, []).append(number)


def log_extra(notes: Notes, column: Any, values: Any, *, count: int) -> None:
    """A column of one value per completion for the inspector (text or a JSON scalar)."""
    if not isinstance(column, str) or not METRIC_NAME.fullmatch(column):
        raise ValueError(f"log_extra column {column!r}: use 1-64 letters, digits, _ . or -")
    if not isinstance(values, list | tuple) or len(values) != count:
        size = len(values) if isinstance(values, list | tuple) else type(values).__name__
        raise ValueError(f"log_extra({column!r}) got {size} values for {count} completions")
    notes.extras[column] = [_cell(v) for v in values]


def _cell(value: Any) -> str | float | int | bool | None:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def checked_scores(values: Any, *, expected: int) -> list[float | None]:
    """The values as floats (None kept); BadReturnValue saying what is wrong otherwise."""
    if not isinstance(values, list | tuple):
        raise BadReturnValue(f"returned {type(values).__name__}, not a list of numbers or None")
    if len(values) != expected:
        raise BadReturnValue(f"returned {len(values)} values for {expected} completions")
    return [finite_number(v, where=f"value {i}") for i, v in enumerate(values)]


def finite_number(value: Any, *, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise BadReturnValue(f"{where} is {value!r}, not a number or None")
    if not math.isfinite(float(value)):
        raise BadReturnValue(f"{where} is {value!r}, not a finite number")
    return float(value)


def call_sync(function: RewardFunction, batch: RewardBatch, notes: Notes) -> list[float | None]:
    """Call a plain function as TRL does; its checked scores."""
    kwargs = trl_kwargs(batch, notes)
    check_arguments(function, kwargs)
    return checked_scores(function(**kwargs), expected=len(batch.completions))


async def call_async(
    function: RewardFunction, batch: RewardBatch, notes: Notes
) -> list[float | None]:
    """Await an `async def` function as TRL does; its checked scores."""
    kwargs = trl_kwargs(batch, notes)
    check_arguments(function, kwargs)
    return checked_scores(await function(**kwargs), expected=len(batch.completions))


def is_async(function: RewardFunction) -> bool:
    """An `async def` function (or an object whose __call__ is one)."""
    call = getattr(function, "__call__", None)  # noqa: B004 - callable objects
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


def metric_means(metrics: dict[str, list[float]], label: str) -> dict[str, float]:
    """`rewards/<label>/<name>`: the mean of a step's values of each logged scalar."""
    return {f"rewards/{label}/{n}": sum(v) / len(v) for n, v in metrics.items() if v}
