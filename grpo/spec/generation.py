"""How a JobSpec's completions are generated: prompt and completion lengths and the
sampling knobs (TRL's names). Pydantic only, imports without torch; grpo/spec/ composes
these fields into JobSpec, grpo/rollout/sampling.py and grpo/rollout/rollout.py apply them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field

from grpo.spec.config import SECTION_CONFIG, SpecInt


@dataclass(frozen=True)
class Sampling:
    """How each next token is drawn (grpo/rollout/sampling.py applies them in transformers' order):
    the knobs generation takes as one object, from `JobSpec.sampling` or built for a greedy
    or held-out pass. Defaults draw from the model's distribution unchanged."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float | None = None
    repetition_penalty: float = 1.0


GREEDY = Sampling(top_k=1)
"""Top-1 sampling: greedy decoding through the same loop as training."""


class GenerationKnobs(BaseModel):
    """Lengths, temperature, truncation of the distribution and stop strings."""

    model_config = SECTION_CONFIG
    max_prompt_length: SpecInt = Field(512, ge=1, le=131072)
    """Prompt tokens at most: a longer prompt loses the start of its content (the prompt
    text or the last user turn), never its template or other turns (see prompt_fit.py);
    the metric prompts/truncated counts them. TRL's name."""
    max_completion_length: SpecInt = Field(16, ge=1, le=131072)
    """Tokens generated at most per completion."""
    temperature: float = Field(1.0, gt=0, le=10)
    """Sampling temperature."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling mass; 1 disables."""
    top_k: SpecInt = Field(0, ge=0, le=1_048_576)
    """Sample among the k most likely tokens; 0 disables."""
    min_p: float | None = Field(None, ge=0, le=1)
    """Drop tokens less likely than min_p times the most likely one (Nguyen et al. 2024,
    arXiv:2407.01082); None disables."""
    repetition_penalty: float = Field(1.0, gt=0, le=10)
    """Logits of tokens already in the prompt or completion are divided by it (multiplied
    when negative; CTRL, arXiv:1909.05858); 1 disables."""
    stop: tuple[Annotated[str, Field(min_length=1, max_length=200)], ...] = Field((), max_length=16)
    """Strings that end a completion; the stop string is kept in the completion."""

    @property
    def sampling(self) -> Sampling:
        """This spec's sampling knobs, as generation takes them."""
        return Sampling(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
        )
