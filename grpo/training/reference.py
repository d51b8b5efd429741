"""The reference policy the KL term pulls toward.

Without LoRA it is a frozen copy of the initial policy; with LoRA it is the same model
with adapters disabled (no second copy of the weights), or with the adapter snapshot of
the last sync. `sync` moves it toward the current policy, ref <- alpha * policy +
(1 - alpha) * ref (TR-DPO; alpha 1 is iterative GRPO's reset). Its pass runs under
no_grad. Under FSDP the frozen copy is sharded as the policy is and gathered whole for its
pass (grpo/parallel/sharding.py). Knows nothing of rewards or the loss.
"""

from __future__ import annotations

import copy
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor

from grpo.models.lora import adapter_snapshot, is_lora, swapped_adapter
from grpo.parallel.sharding import full_model_state, full_weights, is_sharded, load_full_model_state
from grpo.rollout.rollout import Rollout, row_slices
from grpo.training.logprobs import completion_logps


class ReferencePolicy:
    """Frozen reference: a weight copy, or the policy's own base with adapters off."""

    def __init__(self, policy: Any) -> None:
        self.is_lora = is_lora(policy)
        self.frozen = None if self.is_lora else _frozen_copy(policy)
        self.adapters: dict[str, Tensor] | None = None
        """Adapter weights at the last sync (LoRA only); None means adapters disabled."""

    @torch.no_grad()
    def logps(
        self, policy: Any, rollout: Rollout, *, temperature: float, micro_batch_size: int | None
    ) -> Tensor:
        """Per-token log-probabilities of the sampled tokens under the reference (N, T),
        `micro_batch_size` completions per forward pass."""
        pieces = row_slices(rollout.completion_ids.shape[0], micro_batch_size)
        model = policy if self.frozen is None else self.frozen
        # sharded: gathered at once, by every rank, even one without groups (dynamic
        # sampling can leave a rank none), since the gather is a collective
        with self._as_reference(policy), full_weights(model):
            if not pieces:
                return rollout.completion_mask.new_zeros(
                    rollout.completion_mask.shape, dtype=torch.float
                )
            return torch.cat(
                [
                    completion_logps(model, rollout, rows=piece, temperature=temperature)
                    for piece in pieces
                ]
            )

    @torch.no_grad()
    def sync(self, policy: Any, alpha: float = 1.0) -> None:
        """ref <- alpha * policy + (1 - alpha) * ref; alpha 1 makes the policy the reference.

        LoRA references only copy (alpha 1; the spec refuses others): mixing two pairs of
        low-rank factors does not mix the weight updates they stand for."""
        if self.frozen is None:
            self.adapters = adapter_snapshot(policy)
        elif alpha == 1.0:
            self.frozen.load_state_dict(policy.state_dict())
        else:
            mix_weights(self.frozen.state_dict(), policy.state_dict(), alpha)

    def state_dict(self) -> dict[str, Any]:
        """Unsharded (a collective on every rank when sharded)."""
        if self.frozen is not None and is_sharded(self.frozen):
            return {"weights": full_model_state(self.frozen)}
        if self.frozen is not None:
            return {"weights": self.frozen.state_dict()}
        return {"adapters": self.adapters}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.frozen is not None and is_sharded(self.frozen):
            load_full_model_state(self.frozen, state["weights"])
        elif self.frozen is not None:
            self.frozen.load_state_dict(state["weights"])
        else:
            self.adapters = state["adapters"]

    def _as_reference(self, policy: Any) -> AbstractContextManager[Any]:
        if self.frozen is not None:
            return torch.no_grad()
        if self.adapters is None:
            return policy.disable_adapter()  # type: ignore[no-any-return]
        return swapped_adapter(policy, self.adapters)


def mix_weights(ref: dict[str, Tensor], policy: dict[str, Tensor], alpha: float) -> None:
    """In place, ref <- alpha * policy + (1 - alpha) * ref on floating tensors (TR-DPO's soft
    update, Gorbatovski et al. 2024, arXiv:2404.09656); integer buffers are copied."""
    for name, tensor in ref.items():
        source = policy[name].to(tensor.device)
        if tensor.is_floating_point():
            tensor.lerp_(source.to(tensor.dtype), alpha)
        else:
            tensor.copy_(source)


def _frozen_copy(policy: Any) -> Any:
    frozen = copy.deepcopy(policy)
    frozen.eval()
    frozen.requires_grad_(False)
    return frozen
