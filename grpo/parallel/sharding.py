"""FSDP2 (`torch.distributed.fsdp.fully_shard`) of the policy and its frozen reference, for
`resources.sharding: fsdp`: each rank holds 1/world_size of the weights, gradients and
optimizer state.

Layout: every decoder block is one FSDP unit, and the rest (embeddings, final norm, LM
head, tied or not) is the root unit on the decoder, since the log-prob code calls the
decoder and then the head (grpo/training/logprobs.py), never the causal LM's own forward (FSDP2
wants one root module, so the head joins the decoder's unit while fully_shard collects
its parameters). The root keeps its weights gathered from its forward to the end of the
backward (FSDP's default for a root), so the head runs on full weights after the decoder;
blocks gather before their forward and free after.

FSDP's collectives run inside every forward and backward, so the ranks must run the same
number of them: a rank with fewer micro-batches than the busiest runs `idle_passes` (a
one-token forward whose loss is multiplied by 0). Gradients are summed, not averaged,
over ranks (each rank's loss is already over the whole step's normaliser), so the update is
one process's on the union. Generation gathers every unit once (`gathered`) and samples
with plain tensors, so ranks whose completions end at different lengths need no pairing.
Checkpoints gather full state dicts (torch.distributed.checkpoint.state_dict) on every
rank's CPU; rank 0 writes them as the unsharded model's. Knows nothing of the GRPO math.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from torch import Tensor
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import FSDPModule, fully_shard

from grpo.models.lm_head import decoder_and_head
from grpo.parallel.ranks import Ranks
from grpo.rollout.rollout import Rollout
from grpo.training.logprobs import completion_logps

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def shard_model(model: Any) -> None:
    """In place: one FSDP unit per decoder block, one root unit for the rest; the
    reduce-scatter sums gradients over ranks instead of averaging them."""
    decoder, head = decoder_and_head(model)
    for layer in decoder.layers:  # Hugging Face decoders keep their blocks in .layers
        fully_shard(layer)
    decoder.add_module("_fsdp_head", head)  # only while fully_shard collects parameters
    try:
        fully_shard(decoder, reshard_after_forward=False)
    finally:
        del decoder._modules["_fsdp_head"]
    for unit in units(model):
        unit.set_gradient_divide_factor(1.0)
        unit.set_force_sum_reduction_for_comms(True)  # gloo has no premultiplied sum


def shard_models(*models: Any) -> None:
    """shard_model each (the policy and its frozen reference copy: sharded alike); None
    is skipped."""
    for model in models:
        if model is not None:
            shard_model(model)


def full_weights(model: Any) -> AbstractContextManager[Any]:
    """`gathered` for a sharded model, nothing otherwise."""
    return gathered(model) if is_sharded(model) else nullcontext()


def is_sharded(model: Any) -> bool:
    return any(True for _ in units(model))


def units(model: Any) -> Iterator[FSDPModule]:
    """The model's FSDP units, the root (the decoder) first."""
    found = [m for m in model.modules() if isinstance(m, FSDPModule)]
    return iter(found)


@contextmanager
def gathered(model: Any) -> Iterator[None]:
    """Every unit's full weights for the block (generation, a no-grad pass), freed after;
    forwards inside it run no collective."""
    blocks = list(units(model))
    for unit in blocks:
        unit.set_reshard_after_forward(False, recurse=False)
        unit.unshard()
    try:
        yield
    finally:
        for unit in blocks:
            unit.reshard()
        for unit in blocks[1:]:  # the root keeps its weights from forward to backward
            unit.set_reshard_after_forward(True, recurse=False)


def idle_count(ranks: Ranks, num_pieces: int) -> int:
    """Passes this rank adds to its `num_pieces` so it runs as many as the busiest rank."""
    return int(ranks.max([float(num_pieces)])[0]) - num_pieces


def idle_passes(
    model: Any,
    device: torch.device,
    count: int,
    *,
    with_backward: bool,
    autocast: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> None:
    """`count` forwards through every unit of a one-token placeholder, each (with_backward)
    followed by a backward of 0 times its log-prob: gradients of exactly 0, but every
    unit's all-gather (and reduce-scatter) runs, paired with a busier rank's passes."""
    ones = torch.ones((1, 1), dtype=torch.long, device=device)
    placeholder = Rollout(ones, ones, ones, ones, ones[0].bool(), ones.float())
    for _ in range(count):
        with autocast():
            logps: Tensor = completion_logps(model, placeholder, share_prompt=False)
            if with_backward:
                (logps.sum() * 0).backward()  # type: ignore[no-untyped-call]


def full_model_state(model: Any) -> dict[str, Any]:
    """The unsharded state dict on the CPU (a collective: every rank calls it)."""
    return get_model_state_dict(model, options=FULL)


def load_full_model_state(model: Any, state: dict[str, Any]) -> tuple[list[str], list[str]]:
    """A full state dict into the sharded model; (missing, unexpected) keys, as
    load_state_dict(strict=False) gives them."""
    options = StateDictOptions(full_state_dict=True, strict=False)
    missing, unexpected = set_model_state_dict(model, state, options=options)
    return list(missing), list(unexpected)


def full_optimizer_state(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's unsharded state keyed by parameter name (a collective)."""
    return get_optimizer_state_dict(model, optimizer, options=FULL)


def optimizer_state(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What a checkpoint keeps of the optimizer: its own state_dict, or the full one by
    parameter name when sharded (a collective then)."""
    if is_sharded(model):
        return full_optimizer_state(model, optimizer)
    return optimizer.state_dict()


def load_optimizer_state(model: Any, optimizer: torch.optim.Optimizer, state: Any) -> None:
    """A state from optimizer_state of a run on any number of ranks, sharded or not."""
    is_named = isinstance(state["param_groups"][0]["params"][0], str)
    if not is_named and not is_sharded(model):
        optimizer.load_state_dict(state)
        return
    if not is_named:
        state = named_optimizer_state(model, state)
    set_optimizer_state_dict(
        model, optimizer, state, options=StateDictOptions(full_state_dict=True)
    )


def named_optimizer_state(model: Any, state: dict[str, Any]) -> dict[str, Any]:
    """optimizer.state_dict() (positions) keyed by parameter name instead, as
    get_optimizer_state_dict gives it (one param group: build_optimizer makes one)."""
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    return {
        "state": {names[i]: value for i, value in state["state"].items()},
        "param_groups": [
            {**group, "params": [names[i] for i in group["params"]]}
            for group in state["param_groups"]
        ],
    }
