"""What an engine is given: a frozen context of the policy it samples and how, built from
finished values (never the trainer, whose parts may not exist yet when the engine starts).
Knows nothing of rewards, rounds or the loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from grpo.rollout.stopping import StopStrings
from grpo.spec import JobSpec


@dataclass(frozen=True)
class EngineContext:
    """The model an engine samples (the policy, or an asynchronous producer's copy of it),
    its tokenizer and device, the tokens and strings that end a completion, and the spec
    whose knobs it samples with (generation and vllm_* fields)."""

    spec: JobSpec
    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype | None
    """The compute dtype under autocast (None: the model's own)."""
    eos_token_ids: list[int]
    stop_strings: StopStrings | None
    log: Callable[[str, str], None]
    """(level, message) for the run's log."""
