"""What an asynchronous run's producer samples with (grpo/rollout/async_source.py): a view of the
policy with the producer's own tokenizer (a fast tokenizer is not safe to share between
threads) and engine; and for the native engine, `OwnWeights`: our decode loop on a copy of
the policy's weights, which takes the trainer's at each weight sync, and which returns its
own log-probs of the tokens it sampled, the sampler side of the importance correction.
Knows nothing of queues or staleness.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import torch

from grpo.engines.engine import Engine, GenerationRequest
from grpo.engines.native import NativeEngine
from grpo.models.precision import autocast
from grpo.rollout.policy import PolicyView
from grpo.rollout.rollout import Rollout, row_slices
from grpo.rollout.stopping import StopStrings
from grpo.training.logprobs import completion_logps


def producer_view(policy: PolicyView, *, model: Any, engine: Engine | None = None) -> PolicyView:
    """The policy's view with the producer's model, its own copy of the tokenizer (and the
    stop strings read with it) and its engine (None: the policy's)."""
    tokenizer = copy.deepcopy(policy.tokenizer)
    stops = policy.spec.stop
    engine = policy.engine if engine is None else engine
    return replace(
        policy,
        model=model,
        tokenizer=tokenizer,
        stop_strings=StopStrings(tokenizer, stops) if stops else None,
        engine=engine,
        eval_engine=engine,
    )


class OwnWeights:
    """The native engine on its own copy of the policy's weights (frozen, no gradient)."""

    name = "native-own-weights"

    def __init__(self, policy: PolicyView) -> None:
        model = copy.deepcopy(policy.model)
        model.eval()
        model.requires_grad_(False)
        self.view = producer_view(policy, model=model, engine=self)
        self.context = self.view.engine_context
        self.native = NativeEngine(self.context)

    def generate(self, request: GenerationRequest) -> Rollout:
        """The native engine's rollout, with the copy's log-probs of the sampled tokens
        (`sampling_logps`, as the trainer computes its own: at the sampling temperature)."""
        rollout = self.native.generate(request)
        spec, view = self.context.spec, self.context
        pieces = row_slices(rollout.completion_ids.shape[0], spec.micro_batch_size)
        with torch.no_grad(), autocast(view.device, view.dtype):
            logps = torch.cat(
                [
                    completion_logps(view.model, rollout, rows=piece, temperature=spec.temperature)
                    for piece in pieces
                ]
            )  # (N, T)
        return replace(rollout, sampling_logps=logps.float() * rollout.completion_mask)

    @torch.no_grad()
    def load_weights(self, model: Any) -> None:
        """Copy the policy's weights into the producer's (LoRA adapters included)."""
        self.context.model.load_state_dict(model.state_dict())

    def close(self) -> None:
        """Nothing to release (the copy goes with the run)."""
