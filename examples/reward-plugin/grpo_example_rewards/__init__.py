"""Example reward functions for GRPO Service, with TRL's reward-function signature.

Install this package where the workers run (`pip install examples/reward-plugin`); a spec
then names a function by its entry point: `{"name": "python", "function": "contains_answer"}`.
Each gets one entry per completion in `prompts`, `completions` and every keyword list
(`answer` and the extra fields of the records), and returns one float, or None where the
function does not apply, per completion. As in TRL, a dataset of chat-message prompts
hands each completion over as `[{"role": "assistant", "content": text}]`.
"""

from __future__ import annotations

from typing import Any


def _text(completion: str | list[dict[str, str]]) -> str:
    """A completion's text, plain or TRL's conversational form."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def contains_answer(
    prompts: list[Any], completions: list[Any], answer: list[str], **kwargs: Any
) -> list[float | None]:
    """1.0 when the reference answer appears in the completion, else 0.0; None without one."""
    return [
        None if not ref.strip() else float(ref.strip() in _text(completion))
        for completion, ref in zip(completions, answer, strict=True)
    ]


def polite(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """1.0 when the completion says please or thanks, else 0.0."""
    words = ("please", "thank")
    return [float(any(w in _text(c).lower() for w in words)) for c in completions]
