"""What sampling a step's rounds and the held-out evaluation need of the trainer: the
policy, its tokenizer and device, and the run's rewards and generation settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

from grpo.scoring import Rewarder
from grpo.spec import JobSpec
from grpo.stopping import StopStrings


class PolicyView(Protocol):
    """The trainer's attributes that grpo/rounds.py and grpo/heldout.py read."""

    spec: JobSpec
    run_id: str
    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype | None
    rewarder: Rewarder
    eval_rewarder: Rewarder
    eos_token_ids: list[int]
    stop_strings: StopStrings | None
    uses_chat_template: bool
    log: Callable[[str, str], None]
