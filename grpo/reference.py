"""The reference policy the KL term pulls toward.

Without LoRA it is a frozen copy of the initial policy; with LoRA it is the same model
with adapters disabled (no second copy of the weights), or with the adapter snapshot of
the last sync. `sync` resets it to the current policy, as iterative GRPO does. Its pass
runs under no_grad. Knows nothing of rewards or the loss.
"""

from __future__ import annotations

import copy
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor

from grpo.lora import adapter_snapshot, is_lora, swapped_adapter
from grpo.rollout import Rollout, completion_logps


class ReferencePolicy:
    """Frozen reference: a weight copy, or the policy's own base with adapters off."""

    def __init__(self, policy: Any) -> None:
        self.is_lora = is_lora(policy)
        self.frozen = None if self.is_lora else _frozen_copy(policy)
        self.adapters: dict[str, Tensor] | None = None
        """Adapter weights at the last sync (LoRA only); None means adapters disabled."""

    @torch.no_grad()
    def logps(self, policy: Any, rollout: Rollout, *, temperature: float) -> Tensor:
        """Per-token log-probabilities of the sampled tokens under the reference (N, T)."""
        with self._as_reference(policy):
            model = policy if self.frozen is None else self.frozen
            return completion_logps(model, rollout, temperature=temperature)

    def sync(self, policy: Any) -> None:
        """Make the current policy the new reference."""
        if self.frozen is not None:
            self.frozen.load_state_dict(policy.state_dict())
        else:
            self.adapters = adapter_snapshot(policy)

    def state_dict(self) -> dict[str, Any]:
        if self.frozen is not None:
            return {"weights": self.frozen.state_dict()}
        return {"adapters": self.adapters}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.frozen is not None:
            self.frozen.load_state_dict(state["weights"])
        else:
            self.adapters = state["adapters"]

    def _as_reference(self, policy: Any) -> AbstractContextManager[Any]:
        if self.frozen is not None:
            return torch.no_grad()
        if self.adapters is None:
            return policy.disable_adapter()  # type: ignore[no-any-return]
        return swapped_adapter(policy, self.adapters)


def _frozen_copy(policy: Any) -> Any:
    frozen = copy.deepcopy(policy)
    frozen.eval()
    frozen.requires_grad_(False)
    return frozen
