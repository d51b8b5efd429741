"""Checks on a spec's reward entries that need this server's settings and environment:
endpoint hosts against GRPO_REWARD_HOSTS, token variables against the token rule
(grpo/spec/token_env.py: GRPO_REWARD_TOKEN_* or GRPO_REWARD_TOKEN_ENVS), plugin names against
the installed entry points, code rewards against an installed bubblewrap, reward-model
paths against the model roots. Each refusal is a 422 naming the entry's field. Runs nothing
it checks.
"""

from __future__ import annotations

import shutil
from importlib.metadata import entry_points

from app.api.checks.spec import check_model_path
from app.api.errors import ApiError
from app.settings import Settings
from grpo.spec import JobSpec
from grpo.spec.rewards import (
    ENTRY_POINT_GROUP,
    CodeReward,
    HttpReward,
    ModelReward,
    PythonReward,
    RewardSpec,
    endpoint_host,
    is_allowed_host,
)
from grpo.spec.token_env import is_allowed_token_env, token_env_rule


def check_rewards(spec: JobSpec, settings: Settings) -> None:
    """Raise a 422 naming `rewards.<i>.<field>` (or `eval.rewards.<i>.<field>`) for the first
    entry this server refuses."""
    check_entries(spec.rewards, settings, prefix="rewards")
    if spec.eval is not None and spec.eval.rewards is not None:
        check_entries(spec.eval.rewards, settings, prefix="eval.rewards")


def check_entries(entries: tuple[RewardSpec, ...], settings: Settings, *, prefix: str) -> None:
    for i, entry in enumerate(entries):
        match entry:
            case HttpReward() if not is_allowed_host(entry.url, settings.reward_host_list):
                allowed = ", ".join(settings.reward_host_list) or "none (GRPO_REWARD_HOSTS)"
                _reject(
                    f"{prefix}.{i}.url",
                    f"host {endpoint_host(entry.url)!r} is not an allowed reward host; "
                    f"allowed: {allowed}",
                )
            case HttpReward() if entry.token_env is not None and not is_allowed_token_env(
                entry.token_env, settings.reward_token_env_list
            ):
                _reject(
                    f"{prefix}.{i}.token_env",
                    f"{entry.token_env!r} may not be used: "
                    f"{token_env_rule(settings.reward_token_env_list)}",
                )
            case PythonReward() if entry.function not in _installed_functions():
                installed = ", ".join(sorted(_installed_functions())) or "none"
                _reject(
                    f"{prefix}.{i}.function",
                    f"no reward function {entry.function!r} is installed in entry-point group "
                    f"{ENTRY_POINT_GROUP!r} (installed: {installed})",
                )
            case CodeReward() if shutil.which("bwrap") is None:
                _reject(
                    f"{prefix}.{i}",
                    "code rewards run in a bubblewrap sandbox and bubblewrap is not installed "
                    "on this server (apt-get install bubblewrap)",
                )
            case ModelReward():
                check_model_path(entry.model, settings, loc=f"{prefix}.{i}.model")


def _installed_functions() -> set[str]:
    return {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _reject(loc: str, message: str) -> None:
    fields = [{"loc": loc, "message": message}]
    raise ApiError(422, "validation_error", f"invalid job spec: {loc}: {message}", fields)
