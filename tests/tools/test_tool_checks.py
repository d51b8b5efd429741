"""Tool entries at submit (issue 28): what the API refuses is a 422 naming the field, with
the real app, store and settings in the test process (FastAPI's TestClient)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import get_settings
from tests.store_fixture import store

__all__ = ["store"]

SPEC = {
    "name": "tools",
    "model": "builtin:tiny-tools",
    "data": {"source": "builtin:tools"},
    "max_steps": 2,
    "num_generations": 2,
}


@pytest.fixture
def api(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("GRPO_REWARD_HOSTS", "judge.example")
    monkeypatch.setenv("GRPO_TOOL_HOSTS", "tools.example:8080")
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client
    get_settings.cache_clear()


def refusal(api: TestClient, **overrides: object) -> tuple[str, str]:
    response = api.post("/api/runs", json={**SPEC, **overrides})
    assert response.status_code == 422, response.text
    [field] = response.json()["error"]["fields"]
    return field["loc"], field["message"]


def test_installed_tools_and_allowed_hosts_are_accepted(api: TestClient) -> None:
    tools = [
        {"name": "python", "function": "calc"},
        {"name": "environment", "environment": "calculator"},
        {"name": "code"},
        {"name": "http", "label": "search", "url": "http://tools.example:8080/q",
         "description": "Search.", "token_env": "GRPO_REWARD_TOKEN_SEARCH"},
    ]  # fmt: skip
    response = api.post(
        "/api/runs", json={**SPEC, "tools": tools, "max_tool_calling_iterations": 3}
    )
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["tools"][0]["label"] == "calc"


def test_unknown_plugins_and_foreign_hosts_are_refused_naming_the_field(api: TestClient) -> None:
    loc, message = refusal(api, tools=[{"name": "python", "function": "nope"}])
    assert loc == "tools.0.function" and "installed: calc" in message
    loc, _ = refusal(api, tools=[{"name": "environment", "environment": "nope"}])
    assert loc == "tools.0.environment"
    http = {"name": "http", "label": "s", "description": "S.", "url": "http://judge.example/"}
    loc, message = refusal(api, tools=[{"name": "python", "function": "calc"}, http])
    # GRPO_TOOL_HOSTS is set, so the reward hosts do not count for tools
    assert loc == "tools.1.url" and "tools.example:8080" in message
    loc, _ = refusal(
        api, tools=[{**http, "url": "http://tools.example:8080/", "token_env": "HOME"}]
    )
    assert loc == "tools.0.token_env"


def test_a_builtin_model_without_a_tool_template_is_refused(api: TestClient) -> None:
    loc, message = refusal(
        api, model="builtin:tiny", tools=[{"name": "python", "function": "calc"}]
    )
    assert loc == "tools" and "builtin:tiny-tools" in message


def test_pydantic_refuses_bad_entries_with_their_field(api: TestClient) -> None:
    response = api.post("/api/runs", json={**SPEC, "tools": [{"name": "http", "url": "http://x/"}]})
    assert response.status_code == 422 and "description" in response.text
    response = api.post(
        "/api/runs", json={**SPEC, "tools": [{"name": "python", "function": "calc"}] * 2}
    )
    assert response.status_code == 422 and "unique" in response.text
