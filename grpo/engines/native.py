"""The native engine: our own decode loop (grpo/rollout/rollout.py's generate) on the policy's own
weights, so there is nothing to load after a step and nothing to close."""

from __future__ import annotations

from typing import Any

from grpo.engines.context import EngineContext
from grpo.engines.engine import GenerationRequest
from grpo.models.precision import autocast
from grpo.parallel.sharding import full_weights
from grpo.rollout.rollout import CompletionEnds, Rollout, generate


class NativeEngine:
    """Samples with `policy.model` itself (under autocast, full weights when sharded)."""

    name = "native"

    def __init__(self, policy: EngineContext) -> None:
        self.policy = policy

    def generate(self, request: GenerationRequest) -> Rollout:
        policy = self.policy
        with autocast(policy.device, policy.dtype), full_weights(policy.model):
            return generate(
                policy.model,
                request.prompt_ids,
                request.prompt_mask,
                num_generations=request.num_generations,
                ends=CompletionEnds(
                    request.max_new_tokens,
                    tuple(policy.eos_token_ids),
                    policy.tokenizer.pad_token_id,
                    policy.stop_strings,
                ),
                sampling=request.sampling,
                seeds=request.seeds,
                generation_batch_size=policy.spec.generation_batch_size,
            )

    def load_weights(self, model: Any) -> None:
        """Nothing to do: the engine samples with the policy's own parameters."""

    def close(self) -> None:
        """Nothing to release."""
