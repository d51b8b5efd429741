"""A KV cache that grows in place during decoding.

transformers' DynamicLayer appends each decode step's keys and values with `torch.cat`,
which copies the whole cache every token: for G x B rows sharing a long prompt that copy
cost more than the attention itself. `preallocate` swaps each plain DynamicLayer for one
that writes into a buffer sized for the whole generation. Caches of other kinds (sliding
windows, hybrid models) are left as they are. Knows nothing of GRPO.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import Tensor

try:
    from transformers.cache_utils import DynamicLayer
except ImportError:  # transformers < 4.54 has no cache layers: plain growth is used
    DynamicLayer = None  # type: ignore[misc, assignment]


def preallocate(cache: Any, extra_tokens: int) -> None:
    """Give every plain dynamic layer of `cache` room for `extra_tokens` more positions."""
    layers = getattr(cache, "layers", None)
    if DynamicLayer is None or layers is None:
        return
    for i, layer in enumerate(layers):
        if type(layer) is DynamicLayer and layer.is_initialized:
            assert layer.keys is not None and layer.values is not None
            layers[i] = PreallocatedLayer(layer.keys, layer.values, extra_tokens)


if DynamicLayer is not None:

    class PreallocatedLayer(DynamicLayer):  # type: ignore[no-untyped-call]
        """DynamicLayer whose keys/values are views of a buffer filled in place."""

        def __init__(self, keys: Tensor, values: Tensor, extra_tokens: int) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.length = keys.shape[-2]
            self._keys = _buffer(keys, extra_tokens)  # (n, heads, length + extra, dim)
            self._values = _buffer(values, extra_tokens)
            self.device, self.dtype = keys.device, keys.dtype
            self.is_initialized = True
            self._expose()

        def update(
            self, key_states: Tensor, value_states: Tensor, *args: Any, **kwargs: Any
        ) -> tuple[Tensor, Tensor]:
            end = self.length + key_states.shape[-2]
            if end > self._keys.shape[-2]:  # more tokens than planned: grow the buffers
                self._keys = _buffer(self._keys[:, :, : self.length], end - self.length)
                self._values = _buffer(self._values[:, :, : self.length], end - self.length)
            self._keys[:, :, self.length : end] = key_states
            self._values[:, :, self.length : end] = value_states
            self.length = end
            return self._expose()

        def get_seq_length(self) -> int:
            return self.length

        def batch_select_indices(self, indices: Tensor) -> None:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._expose()

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._keys = self._keys.repeat_interleave(repeats, dim=0)
            self._values = self._values.repeat_interleave(repeats, dim=0)
            self._expose()

        def _expose(self) -> tuple[Tensor, Tensor]:
            keys, values = self._keys[:, :, : self.length], self._values[:, :, : self.length]
            self.keys, self.values = keys, values
            return keys, values


def _buffer(states: Tensor, extra_tokens: int) -> Tensor:
    n, heads, length, dim = states.shape
    buffer = states.new_empty((n, heads, length + extra_tokens, dim))
    buffer[:, :, :length] = states
    return buffer


def cache_argument(module: Any) -> str:
    """transformers 5.2x renamed `past_key_values` to `cache`; accept both generations."""
    base = module.get_base_model() if hasattr(module, "get_base_model") else module
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def cache_of(out: Any) -> Any:
    """The KV cache of a forward pass's output, under either generation's name."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values
