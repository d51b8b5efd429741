"""Generation beside training (shared/DESIGN.md, round 4): the asynchronous GRPO knobs, with
TRL's AsyncGRPOConfig names and defaults, and the combinations they do not support yet.

A producer samples and scores the groups of later steps while the trainer updates on the
current one, at most `max_staleness` policy versions behind it; weights reach the sampler
every `weight_sync_steps` updates. A policy version counts optimizer updates (the weights
after k updates are version k), so a group's staleness is the trainer's version when it
trains on it minus the version that sampled it, in TRL's unit ("weight update steps").
Pydantic only, imports without torch; grpo/rollout/group_source.py and
grpo/rollout/async_source.py apply these fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from grpo.spec.algorithm import DynamicSamplingSpec
from grpo.spec.config import SECTION_CONFIG, SpecInt
from grpo.spec.resources import ResourcesSpec


class AsyncKnobs(BaseModel):
    """Asynchronous generation and how often the sampler takes the trainer's weights."""

    model_config = SECTION_CONFIG
    async_generation: bool = False
    """Sample and score the groups of later steps on a producer thread while the trainer
    updates, instead of in turn (TRL's AsyncGRPOTrainer, which TRL picks by class; here one
    spec). The producer samples with its own copy of the weights (native engine) or on the
    vLLM server (vllm_mode server), at most max_staleness policy versions behind the
    trainer; the importance correction (vllm_importance_sampling_*) weighs each token by
    the trainer's over the sampler's probability. Off-policy by design: verl's one-step
    off-policy and fully asynchronous modes, AReaL (Fu et al. 2025, "AReaL: a large-scale
    asynchronous reinforcement learning system for language reasoning",
    arXiv:2505.24298)."""
    max_staleness: SpecInt = Field(4, ge=0, le=1000)
    """How many policy versions (optimizer updates) a group may lag behind the trainer when
    it trains on it; the producer samples no further ahead, and a group older than this is
    dropped and counted (async/dropped_stale), never trained. 0: every group is sampled by
    the weights it trains, the synchronous steps exactly. TRL AsyncGRPOConfig's name and
    default (4)."""
    weight_sync_steps: SpecInt = Field(1, ge=1, le=10**6)
    """Hand the sampler the trainer's weights after every k-th update rather than after
    each (a push to the vLLM server costs a copy of the model): between two syncs the
    sampler samples with the weights of the last one. No effect on the native engine
    without async_generation (it samples with the policy itself). TRL AsyncGRPOConfig's
    name and default (1)."""


class AsyncSpec(Protocol):
    """What `async_refusal` reads of a JobSpec (the spec's own module composes the knobs)."""

    @property
    def async_generation(self) -> bool: ...
    @property
    def max_staleness(self) -> int: ...
    @property
    def weight_sync_steps(self) -> int: ...
    @property
    def use_vllm(self) -> bool: ...
    @property
    def vllm_mode(self) -> str: ...
    @property
    def tools(self) -> Sequence[object]: ...
    @property
    def eval(self) -> object | None: ...
    @property
    def resources(self) -> ResourcesSpec: ...
    @property
    def dynamic_sampling(self) -> DynamicSamplingSpec: ...


def async_refusal(spec: AsyncSpec) -> tuple[str, str] | None:
    """The field at fault and why, for a combination async_generation does not support yet;
    None when it is supported (or async_generation is off)."""
    if not spec.async_generation:
        return None
    not_yet = "async_generation does not support this yet"
    if spec.use_vllm and spec.vllm_mode == "colocate":
        return "vllm_mode", (
            f"{not_yet}: a colocated engine shares the trainer's process and device, so it "
            "cannot sample beside the update; use vllm_mode server, or the native engine "
            "(use_vllm false)"
        )
    if spec.resources.num_nodes > 1:
        return "resources.num_nodes", (
            f"{not_yet}: one trainer process owns the producer and its weight syncs; "
            "use num_nodes 1"
        )
    if spec.resources.num_processes > 1:
        return "resources.num_processes", (
            f"{not_yet}: one trainer process owns the producer and its weight syncs; "
            "use num_processes 1"
        )
    if spec.tools:
        return "tools", f"{not_yet}: multi-turn tool rollouts are sampled in turn only"
    if spec.dynamic_sampling.enabled:
        return "dynamic_sampling.enabled", (
            f"{not_yet}: dynamic sampling decides a step's extra rounds from the step's "
            "whole batch, which the producer samples ahead"
        )
    if spec.eval is not None:
        return "eval", (
            f"{not_yet}: held-out evaluation samples with the engine the producer holds"
        )
    if spec.weight_sync_steps - 1 > spec.max_staleness:
        return "max_staleness", (
            f"must be at least weight_sync_steps - 1 ({spec.weight_sync_steps - 1}) with "
            "async_generation: between two syncs the sampler's weights fall that many "
            "versions behind, so every group would be too stale to train"
        )
    return None
