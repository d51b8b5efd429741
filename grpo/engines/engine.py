"""What a generation engine is to the trainer (shared/DESIGN.md, "Rollouts").

An engine turns requests (tokenized prompts, sampling knobs, one seed per prompt) into a
Rollout; after each optimizer step it takes the policy's new weights. The trainer never
sees which engine ran: the loss's log-probs are always the trainer's own recomputation
(grpo/training/logprobs.py); an engine's sampling log-probs (`Rollout.sampling_logps`) only measure,
and with importance-sampling correction correct, the gap between the two.

Engines: `native` (grpo/engines/native.py, our decode loop), `vllm` (colocated) and
`vllm-server` (grpo/engines/vllm_server.py, a vLLM server in another process), kinds of
grpo/engines/registry.py, each built from a frozen EngineContext (grpo/engines/context.py). A
multi-turn tool loop wraps an engine and calls it once per turn with per-trajectory seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from torch import Tensor

from grpo.rollout.rollout import Rollout
from grpo.spec.generation import Sampling


@dataclass(frozen=True)
class GenerationRequest:
    """B prompts to complete num_generations times each.

    seeds[b] seeds prompt b's sampling stream (its num_generations completions all draw
    from it, see sampling.GroupUniforms); each seed derives from (seed, step, round,
    position in the step) only (sampling.group_seed), so what is sampled never depends on
    how requests are batched, on the engine's batch or on the number of ranks. None: the
    global RNG (tests and greedy evaluation only).
    """

    prompt_ids: Tensor  # (B, P) left-padded
    prompt_mask: Tensor  # (B, P) 1 on prompt tokens
    num_generations: int
    max_new_tokens: int
    sampling: Sampling
    seeds: Sequence[int] | None = None
    records: Sequence[dict[str, Any]] | None = None
    """Per prompt, its record (`prompt`, `answer` and the extra fields): what an
    environment's reset(**record) is told; engines without tools ignore it."""


class Engine(Protocol):
    """A generation engine, one per rank, living as long as the run."""

    name: str

    def generate(self, request: GenerationRequest) -> Rollout:
        """The request's completions, row i of them belonging to prompt i // G."""
        ...

    def load_weights(self, model: Any) -> int | None:
        """Take the policy's weights after an optimizer step (in memory; any cache of
        prompts computed under the old weights is dropped). An engine that counts policy
        versions (server mode: one per push) returns the new one; the others None."""
        ...

    def close(self) -> None:
        """Release the engine's memory and processes; the run ends."""
        ...
