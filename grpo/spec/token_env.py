"""Which worker environment variables a spec may name as a bearer token, and reading one.

A spec never carries a secret: an `http` reward (and an `http` tool) names a variable of
the worker's environment (`token_env`) whose value is sent to the endpoint. A spec must
not be able to send the service's own settings (GRPO_API_TOKENS, GRPO_DATABASE_URL, ...)
or any other variable of the worker to a host, so a name is allowed only when it is

- a variable made for this: it starts with TOKEN_ENV_PREFIX (`GRPO_REWARD_TOKEN_JUDGE`), or
- one the operator lists in GRPO_REWARD_TOKEN_ENVS (`JUDGE_TOKEN,OPENAI_API_KEY`),

and it is never any other `GRPO_*` name, listed or not (those are the service's settings).
The API applies the rule at submit (a 422 naming the field) and the worker again before
reading the variable. On the worker a variable that is allowed but not set (or empty)
reads exactly as a forbidden one, so a spec cannot probe which variables exist.

The one definition of the rule: rewards and tools call it, and so does the API.
Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

TOKEN_ENV_PREFIX = "GRPO_REWARD_TOKEN_"
"""Worker variables with this prefix may always be named as a token."""
TOKEN_ENVS_SETTING = "GRPO_REWARD_TOKEN_ENVS"
"""The operator's list of other variables that may be named; itself never a token."""
SETTINGS_PREFIX = "GRPO_"


class TokenEnvError(ValueError):
    """A token variable the spec may not use here, or that this worker does not have: one
    message for both."""


def is_reserved_name(name: str) -> bool:
    """A name no operator list can allow: every GRPO_* variable (settings are read whatever
    their case) but those made for tokens."""
    if name.upper() == TOKEN_ENVS_SETTING:
        return True
    if name.startswith(TOKEN_ENV_PREFIX) and len(name) > len(TOKEN_ENV_PREFIX):
        return False
    return name.upper().startswith(SETTINGS_PREFIX)


def is_allowed_token_env(name: str, listed: Collection[str]) -> bool:
    """Whether a spec may name `name` as its token variable (the rule above)."""
    if is_reserved_name(name):
        return False
    return name.startswith(TOKEN_ENV_PREFIX) or name in listed


def token_env_rule(listed: Collection[str] | None) -> str:
    """The rule in words, for error messages; with the listed names when known."""
    shown = ""
    if listed is not None:
        names = ", ".join(sorted(n for n in listed if is_allowed_token_env(n, listed)))
        shown = f" (listed: {names or 'none'})"
    return (
        f"name a variable starting with {TOKEN_ENV_PREFIX} or one listed in the operator's "
        f"{TOKEN_ENVS_SETTING}{shown}; other GRPO_* variables never"
    )


def check_token_env(name: str, listed: Collection[str]) -> None:
    """Refuse (TokenEnvError) a name the rule forbids; says nothing of the environment."""
    if not is_allowed_token_env(name, listed):
        raise TokenEnvError(f"token_env {name!r} may not be used: {token_env_rule(listed)}")


def read_token(name: str, listed: Collection[str], environ: Mapping[str, str] | None = None) -> str:
    """The value of an allowed, set, non-empty variable. Otherwise one TokenEnvError whose
    message is the same whether the name is forbidden or the variable is missing."""
    env = os.environ if environ is None else environ
    value = env.get(name, "") if is_allowed_token_env(name, listed) else ""
    if not value:
        raise TokenEnvError(
            f"token_env {name!r} is not a token this worker offers: {token_env_rule(listed)}, "
            "set on every worker"
        )
    return value
