"""Submit-time checks of reward entries against this server (app/api/checks/rewards.py)."""

from __future__ import annotations

import pytest
from huggingface_hub import constants
from pydantic import ValidationError

from app.api.checks.rewards import check_rewards
from app.api.errors import ApiError
from app.settings import Settings
from grpo.spec import JobSpec


def _refusal(rewards: list[dict[str, object]], settings: Settings) -> dict[str, str]:
    with pytest.raises(ApiError) as refused:
        check_rewards(JobSpec(rewards=rewards), settings)
    assert refused.value.status == 422
    return refused.value.fields[0]


def test_endpoint_hosts_must_be_listed(tmp_path):
    settings = Settings(data_dir=tmp_path, reward_hosts="judge.internal, 127.0.0.1:8080")
    check_rewards(JobSpec(rewards=[{"name": "http", "url": "http://judge.internal:9/s"}]), settings)
    check_rewards(JobSpec(rewards=[{"name": "http", "url": "http://127.0.0.1:8080/s"}]), settings)
    field = _refusal(
        [{"name": "accuracy"}, {"name": "http", "url": "http://127.0.0.1:8081/s"}], settings
    )
    assert field["loc"] == "rewards.1.url" and "'127.0.0.1:8081'" in field["message"]


@pytest.mark.parametrize(
    "url",
    [
        "http://\uff11\uff12\uff17.0.0.1:8080/s",  # full-width digits: not 127.0.0.1
        "http://127.0.0.1\u3002:8080/s",  # an ideographic full stop after the host
    ],
)
def test_look_alike_hosts_break_the_url_rule_before_any_list_is_read(url):
    """A host outside ASCII is refused by the one URL rule of a spec (grpo/spec/endpoints.py):
    IDNA would fold it onto the name it imitates."""
    with pytest.raises(ValidationError) as refused:
        JobSpec(rewards=[{"name": "http", "url": url}])
    [error] = refused.value.errors()
    assert error["loc"] == ("rewards", 0, "http", "url") and "ASCII" in error["msg"]


def test_a_trailing_dot_is_another_name_to_the_list(tmp_path):
    """A host is allowed only when it is, character for character, a listed one."""
    settings = Settings(data_dir=tmp_path, reward_hosts="judge.internal, 127.0.0.1:8080")
    field = _refusal([{"name": "http", "url": "http://JUDGE.internal.:9/s"}], settings)
    assert field["loc"] == "rewards.0.url"


def test_no_listed_hosts_refuses_every_endpoint(tmp_path):
    field = _refusal([{"name": "http", "url": "http://localhost/s"}], Settings(data_dir=tmp_path))
    assert "GRPO_REWARD_HOSTS" in field["message"]


def test_plugins_must_be_installed_entry_points(tmp_path):
    settings = Settings(data_dir=tmp_path)
    check_rewards(JobSpec(rewards=[{"name": "python", "function": "contains_answer"}]), settings)
    field = _refusal([{"name": "python", "function": "builtins.eval"}], settings)
    assert field["loc"] == "rewards.0.function" and "contains_answer" in field["message"]


def test_code_rewards_are_refused_without_bubblewrap(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    field = _refusal([{"name": "code"}], Settings(data_dir=tmp_path))
    assert field["loc"] == "rewards.0" and "bubblewrap" in field["message"]


def test_a_local_reward_model_must_lie_inside_the_model_roots(tmp_path):
    settings = Settings(
        data_dir=tmp_path, model_roots=str(tmp_path / "models"), check_hub_models=False
    )
    check_rewards(JobSpec(rewards=[{"name": "model", "model": "org/reward-model"}]), settings)
    check_rewards(
        JobSpec(rewards=[{"name": "model", "model": str(tmp_path / "models" / "rm")}]), settings
    )
    field = _refusal([{"name": "model", "model": "/etc/rm"}], settings)
    assert field["loc"] == "rewards.0.model"


def test_a_hub_reward_model_is_checked_as_the_policys_model_is(tmp_path, monkeypatch):
    """An id this machine cannot load is refused naming the entry's `model` (the hub is
    offline and the cache empty here); GRPO_CHECK_HUB_MODELS=false turns the check off."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    entry = {"name": "model", "model": "org/reward-model"}
    field = _refusal([entry], Settings(data_dir=tmp_path))
    assert field["loc"] == "rewards.0.model" and "HF_HUB_OFFLINE is set" in field["message"]
    assert "GRPO_CHECK_HUB_MODELS=false" in field["message"]
    check_rewards(JobSpec(rewards=[entry]), Settings(data_dir=tmp_path, check_hub_models=False))


def test_token_variables_follow_the_operator_list_and_never_name_a_setting(tmp_path):
    settings = Settings(
        data_dir=tmp_path, reward_hosts="judge.internal", reward_token_envs="JUDGE_TOKEN"
    )

    def endpoint(token_env: str) -> list[dict[str, object]]:
        return [{"name": "http", "url": "http://judge.internal/s", "token_env": token_env}]

    check_rewards(JobSpec(rewards=endpoint("JUDGE_TOKEN")), settings)
    check_rewards(JobSpec(rewards=endpoint("GRPO_REWARD_TOKEN_JUDGE")), settings)
    field = _refusal(endpoint("HOME"), settings)
    assert field["loc"] == "rewards.0.token_env"
    assert "GRPO_REWARD_TOKEN_" in field["message"] and "JUDGE_TOKEN" in field["message"]
