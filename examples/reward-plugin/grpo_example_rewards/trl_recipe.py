"""Reward functions written exactly as public TRL GRPO recipes write them: they read the
`solution` column by its own name, `completion_ids`, `trainer_state`, `log_metric` and
`log_extra`, and one is `async def`. GRPO Service calls them unchanged.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

ASYNC_SLEEP_S = 0.3
"""How long each async function waits, as a judge call would: run concurrently, two of
them cost one wait, not two."""
_in_flight = 0
"""Async calls of this module started and not yet ended, in this process."""


async def _wait_as_a_judge(kwargs: dict[str, Any]) -> None:
    """Wait ASYNC_SLEEP_S, then log `peers_in_flight`: how many other async calls of this
    module were still waiting when this one woke. Run concurrently, the first of two to
    wake sees the other (1); run one after the other, neither does (0)."""
    global _in_flight
    _in_flight += 1
    try:
        await asyncio.sleep(ASYNC_SLEEP_S)
        kwargs["log_metric"]("peers_in_flight", _in_flight - 1)
    finally:
        _in_flight -= 1


def _content(completion: Any) -> str:
    return completion if isinstance(completion, str) else completion[0]["content"]


def accuracy_reward(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    """1.0 when the last number of the completion equals the solution (open-r1 style), and
    logs the share of completions with any number at all."""
    scores, has_number = [], []
    for completion, sol in zip(completions, solution, strict=True):
        numbers = re.findall(r"-?\d+", _content(completion))
        has_number.append(bool(numbers))
        scores.append(float(bool(numbers) and numbers[-1] == sol.strip()))
    kwargs["log_metric"]("has_number", sum(has_number) / len(has_number))
    last = [(re.findall(r"-?\d+", _content(c)) or [""])[-1] for c in completions]
    kwargs["log_extra"]("last_number", last)
    return scores


def short_completion_reward(completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
    """Shorter is better: 1 / (1 + tokens), read from the token ids TRL passes."""
    return [1.0 / (1.0 + len(ids)) for ids in completion_ids]


def scheduled_reward(completions: list[Any], trainer_state: Any, **kwargs: Any) -> list[float]:
    """A reward that changes with training: the global step over 10, for each completion."""
    return [trainer_state.global_step / 10.0 for _ in completions]


async def async_judge_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """A stand-in for an LLM judge called over the network: waits, then scores length."""
    await _wait_as_a_judge(kwargs)
    return [min(1.0, len(_content(c)) / 20.0) for c in completions]


async def async_format_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """A second async function: 1.0 when the completion has a digit."""
    await _wait_as_a_judge(kwargs)
    return [float(any(ch.isdigit() for ch in _content(c))) for c in completions]
