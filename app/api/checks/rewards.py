"""Checks on a spec's reward entries that need this server's settings and environment:
each entry's kind (grpo/rewards/registry.py) says what this server refuses, from the facts
given here: endpoint hosts against GRPO_REWARD_HOSTS, token variables against the token rule
(GRPO_REWARD_TOKEN_* or GRPO_REWARD_TOKEN_ENVS), plugin names against the installed entry
points and the functions the plugin folders' files define (GRPO_PLUGIN_DIRS, read, never
run), code rewards against an installed bubblewrap, reward models as the policy's `model`
(a path against the model roots, a hub id against the cache and the hub). Each refusal is a
422 naming the entry's field, every refusal listed. Runs nothing it checks.
"""

from __future__ import annotations

from functools import partial

from app.api.checks.refusal import Problem, problem, refuse
from app.api.checks.spec import hub_problem, local_model_problem
from app.settings import Settings
from grpo.rewards.kind import ServerFacts
from grpo.rewards.registry import answer_refusals, kind_of
from grpo.spec import JobSpec
from grpo.spec.rewards import RewardSpec


def check_rewards(spec: JobSpec, settings: Settings) -> None:
    """Raise a 422 naming `rewards.<i>.<field>` (or `eval.rewards.<i>.<field>`) for each
    entry this server refuses."""
    refuse(reward_problems(spec, settings))


def reward_problems(spec: JobSpec, settings: Settings) -> list[Problem]:
    found = [problem(loc, why) for loc, why in answer_refusals(spec)]
    found += entry_problems(spec.rewards, settings, prefix="rewards")
    if spec.eval is not None and spec.eval.rewards is not None:
        found += entry_problems(spec.eval.rewards, settings, prefix="eval.rewards")
    return found


def entry_problems(
    entries: tuple[RewardSpec, ...], settings: Settings, *, prefix: str
) -> list[Problem]:
    server = ServerFacts(
        reward_hosts=tuple(settings.reward_host_list),
        token_envs=tuple(settings.reward_token_env_list),
        local_model_problem=partial(local_model_problem, settings=settings),
        hub_model_problem=partial(hub_problem, settings=settings),
        plugin_dirs=tuple(settings.plugin_dir_list),
    )
    found = []
    for i, entry in enumerate(entries):
        refusal = kind_of(entry).check(entry, server)
        if refusal is not None:
            loc = f"{prefix}.{i}.{refusal.field}" if refusal.field else f"{prefix}.{i}"
            found.append(problem(loc, refusal.message))
    return found
