"""What an asynchronous run's producer samples with (grpo/rollout/async_source.py): a view of the
policy with the producer's own tokenizer (a fast tokenizer is not safe to share between
threads) and engine; and for the native engine, `OwnWeights`: our decode loop on a copy of
the policy's weights, which takes the trainer's at each weight sync, and which returns its
own log-probs of the tokens it sampled, the sampler side of the importance correction.
Knows nothing of queues or staleness.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
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


class ProducerView:
    """A PolicyView whose model, tokenizer (its own copy) and engine are the producer's;
    `engine` None: set it once built (an engine may need the view)."""

    def __init__(self, policy: PolicyView, *, model: Any, engine: Engine | None = None) -> None:
        self.spec, self.run_id, self.model = policy.spec, policy.run_id, model
        self.tokenizer = copy.deepcopy(policy.tokenizer)
        self.device, self.dtype = policy.device, policy.dtype
        self.rewarder, self.eval_rewarder = policy.rewarder, policy.eval_rewarder
        self.eos_token_ids, self.uses_chat_template = (
            policy.eos_token_ids,
            policy.uses_chat_template,
        )
        stops = policy.spec.stop
        self.stop_strings = StopStrings(self.tokenizer, stops) if stops else None
        self.log: Callable[[str, str], None] = policy.log
        self.engine: Engine = policy.engine if engine is None else engine
        self.eval_engine: Engine = self.engine
        self.tool_schemas = policy.tool_schemas


class OwnWeights:
    """The native engine on its own copy of the policy's weights (frozen, no gradient)."""

    name = "native-own-weights"

    def __init__(self, policy: PolicyView) -> None:
        model = copy.deepcopy(policy.model)
        model.eval()
        model.requires_grad_(False)
        self.view = ProducerView(policy, model=model)
        self.view.engine = self.view.eval_engine = self
        self.native = NativeEngine(self.view)

    def generate(self, request: GenerationRequest) -> Rollout:
        """The native engine's rollout, with the copy's log-probs of the sampled tokens
        (`sampling_logps`, as the trainer computes its own: at the sampling temperature)."""
        rollout = self.native.generate(request)
        spec, view = self.view.spec, self.view
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
        self.view.model.load_state_dict(model.state_dict())

    def close(self) -> None:
        """Nothing to release (the copy goes with the run)."""
