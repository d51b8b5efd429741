"""Which source a run takes its scored groups from (grpo/rollout/group_source.py), and what its
producer samples with: the synchronous source on the trainer's own rounds and engine; with
async_generation, a producer on the vLLM server (the trainer's engine, over HTTP) or, for
the native engine, on its own copy of the weights (grpo/engines/producer.py). The spec
refuses the other combinations at submit (grpo/spec/asynchrony.py)."""

from __future__ import annotations

from grpo.data.example import Example
from grpo.engines.producer import OwnWeights, producer_view
from grpo.engines.registry import kind_of
from grpo.parallel.ranks import Ranks
from grpo.rollout.async_source import AsyncSource
from grpo.rollout.group_source import GroupSource, SyncSource
from grpo.rollout.policy import PolicyView
from grpo.rollout.rounds import Rounds


def build_source(
    policy: PolicyView, rounds: Rounds, examples: list[Example], ranks: Ranks
) -> GroupSource:
    """The run's source; `rounds`: the trainer's own, which the synchronous source samples."""
    spec = policy.spec
    if not spec.async_generation:
        return SyncSource(rounds, policy.engine, spec)
    if kind_of(spec).own_weights:
        own = OwnWeights(policy)
        return AsyncSource(Rounds(own.view, examples, ranks), own, spec)
    view = producer_view(policy, model=policy.model)
    return AsyncSource(Rounds(view, examples, ranks), policy.engine, spec)
