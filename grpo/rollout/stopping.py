"""Stop strings: a completion ends at the first token after which its text contains one of
them (vLLM's and transformers' `stop`); that token, and so the stop string, stays in it.

Each decode step only the newest tokens of the live rows are decoded: a stop string of L
characters completed by the newest token lies within its last 4L + 1 tokens, even where a
byte-level BPE spends up to four tokens on one character, and one that completed earlier
would already have ended the row. Knows nothing of models or the loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor


class StopStrings:
    """Finds the rows of a batch whose newest token completes a stop string."""

    def __init__(self, tokenizer: Any, stops: Sequence[str]) -> None:
        if not stops or not all(stops):
            raise ValueError("stop strings must be non-empty")
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.window = 4 * max(len(s) for s in self.stops) + 1

    def hits(self, tokens: Tensor) -> Tensor:
        """tokens (n, t): each row's completion so far -> (n,) True where its text contains
        a stop string (which, row by row called every step, the newest token completed)."""
        tails = tokens[:, -self.window :].tolist()
        texts = self.tokenizer.batch_decode(tails, skip_special_tokens=True)
        found = [any(stop in text for stop in self.stops) for text in texts]
        return torch.tensor(found, dtype=torch.bool, device=tokens.device)


def first_stop(text: str, stops: Sequence[str]) -> str | None:
    """The stop string that ends `text` earliest (the one that stopped it), or None."""
    ends = [(text.find(s) + len(s), s) for s in stops if s in text]
    return min(ends)[1] if ends else None
