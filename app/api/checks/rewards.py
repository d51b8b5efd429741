"""Checks on a spec's reward entries that need this server's settings and environment:
each entry's kind (grpo/rewards/registry.py) says what this server refuses, from the facts
given here: endpoint hosts against GRPO_REWARD_HOSTS, token variables against the token rule
(GRPO_REWARD_TOKEN_* or GRPO_REWARD_TOKEN_ENVS), plugin names against the installed entry
points, code rewards against an installed bubblewrap, reward models as the policy's `model`
(a path against the model roots, a hub id against the cache and the hub). Each refusal is a
422 naming the entry's field. Runs nothing it checks.
"""

from __future__ import annotations

from functools import partial

from app.api.checks.spec import hub_problem, local_model_problem
from app.api.errors import ApiError
from app.settings import Settings
from grpo.rewards.kind import ServerFacts
from grpo.rewards.registry import answer_refusals, kind_of
from grpo.spec import JobSpec
from grpo.spec.rewards import RewardSpec


def check_rewards(spec: JobSpec, settings: Settings) -> None:
    """Raise a 422 naming `rewards.<i>.<field>` (or `eval.rewards.<i>.<field>`) for the first
    entry this server refuses."""
    for loc, why in answer_refusals(spec)[:1]:
        _reject(loc, why)
    check_entries(spec.rewards, settings, prefix="rewards")
    if spec.eval is not None and spec.eval.rewards is not None:
        check_entries(spec.eval.rewards, settings, prefix="eval.rewards")


def check_entries(entries: tuple[RewardSpec, ...], settings: Settings, *, prefix: str) -> None:
    server = ServerFacts(
        reward_hosts=tuple(settings.reward_host_list),
        token_envs=tuple(settings.reward_token_env_list),
        local_model_problem=partial(local_model_problem, settings=settings),
        hub_model_problem=partial(hub_problem, settings=settings),
    )
    for i, entry in enumerate(entries):
        refusal = kind_of(entry).check(entry, server)
        if refusal is not None:
            loc = f"{prefix}.{i}.{refusal.field}" if refusal.field else f"{prefix}.{i}"
            _reject(loc, refusal.message)


def _reject(loc: str, message: str) -> None:
    fields = [{"loc": loc, "message": message}]
    raise ApiError(422, "validation_error", f"invalid job spec: {loc}: {message}", fields)
