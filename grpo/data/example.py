"""Example: one prompt with its reference answer, whatever task or file it came from.

The one type the loaders, the built-in tasks, the rewards and the report share. Knows
nothing of models, HTTP or SQL.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from grpo.data.records import Prompt


@dataclass(frozen=True)
class Example:
    """One prompt with its reference answer; `id` is stable within its source."""

    id: str
    prompt: Prompt
    """Text, or chat messages rendered with the model's chat template (grpo/data/records.py)."""
    answer: str
    data: dict[str, Any] = dataclasses.field(default_factory=dict, hash=False, compare=False)
    """Every other field of the record, handed to reward functions (tests, metadata)."""
