"""The token-variable rule (grpo/spec/token_env.py): which worker variables a spec may name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.settings import Settings
from grpo.spec.rewards import HttpReward
from grpo.spec.token_env import (
    TokenEnvError,
    check_token_env,
    is_allowed_token_env,
    read_token,
)

LISTED = ("JUDGE_TOKEN", "GRPO_API_TOKENS", "grpo_database_url")
"""An operator's GRPO_REWARD_TOKEN_ENVS, with two settings listed by mistake."""


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("GRPO_REWARD_TOKEN_JUDGE", True),
        ("JUDGE_TOKEN", True),
        ("OTHER_TOKEN", False),
        ("GRPO_REWARD_TOKEN_", False),
        ("GRPO_REWARD_TOKEN_ENVS", False),
        ("grpo_reward_token_envs", False),
        ("GRPO_REWARD_TOKEN_envs", False),
        ("GRPO_API_TOKENS", False),
        ("grpo_database_url", False),
        ("GRPO_BROKER_URL", False),
        ("Grpo_Api_Tokens", False),
        ("grpo_reward_token_judge", False),
    ],
)
def test_only_token_variables_and_listed_non_settings_are_allowed(name, allowed):
    assert is_allowed_token_env(name, LISTED) is allowed


def test_no_setting_of_the_service_is_ever_allowed_even_when_listed():
    names = [f"GRPO_{field.upper()}" for field in Settings.model_fields]
    every = [*names, *(n.lower() for n in names)]
    assert [n for n in every if is_allowed_token_env(n, every)] == []


def test_a_missing_allowed_variable_reads_as_a_forbidden_one():
    environ = {"GRPO_API_TOKENS": "s3cret", "JUDGE_TOKEN": "", "GRPO_REWARD_TOKEN_A": "tok"}
    assert read_token("GRPO_REWARD_TOKEN_A", LISTED, environ) == "tok"
    messages = []
    for name in ("GRPO_API_TOKENS", "JUDGE_TOKEN", "GRPO_REWARD_TOKEN_B", "NOT_LISTED"):
        with pytest.raises(TokenEnvError) as refused:
            read_token(name, LISTED, environ)
        messages.append(str(refused.value).replace(repr(name), "NAME"))
        assert "s3cret" not in str(refused.value)
    assert len(set(messages)) == 1, messages


def test_check_says_the_rule_and_the_listed_names():
    with pytest.raises(TokenEnvError, match="GRPO_REWARD_TOKEN_.*listed: JUDGE_TOKEN\\)"):
        check_token_env("HOME", LISTED)
    check_token_env("JUDGE_TOKEN", LISTED)


@pytest.mark.parametrize("name", ["GRPO_API_TOKENS", "GRPO_DATABASE_URL", "grpo_broker_url"])
def test_the_spec_refuses_settings_names_without_knowing_the_server(name):
    with pytest.raises(ValidationError, match="token_env"):
        HttpReward(url="http://judge/score", token_env=name)
    assert HttpReward(url="http://judge/score", token_env="JUDGE_TOKEN").token_env
