"""POST /api/specs/convert in the test process (TestClient over the real app and store):
three GRPOConfig YAMLs written like public recipes, and an AsyncGRPOConfig one (on a vLLM
server at 127.0.0.1, a host allowed by default), become specs that POST /api/runs takes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.routes import specs
from app.main import create_app
from app.settings import get_settings
from tests.spec.test_yaml_input import billion_laughs
from tests.store_fixture import store

__all__ = ["store"]
RECIPES = Path(__file__).parents[1] / "data" / "trl_recipes"


@pytest.fixture
def api(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The recipes name hub models this machine does not have: the API's hub check is off,
    as on a server whose workers keep their own caches (tests/models/test_hub_models.py
    covers the check)."""
    monkeypatch.setenv("GRPO_CHECK_HUB_MODELS", "false")
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "recipe", ["open_r1_math", "trl_docs_dapo", "lora_gsm8k", "async_grpo_gsm8k"]
)
def test_a_converted_recipe_passes_submit(api: TestClient, recipe: str) -> None:
    config = (RECIPES / f"{recipe}.yaml").read_text()
    converted = api.post("/api/specs/convert", json={"config": config})
    assert converted.status_code == 200, converted.text
    body = converted.json()
    assert body["unmapped"] and "# Not mapped:" in body["yaml"]
    submitted = api.post("/api/runs", json=body["spec"])
    assert submitted.status_code == 201, submitted.text


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_config_class_says_which_trl_trainer_the_recipe_configures(api: TestClient) -> None:
    """As `grpo convert --async`: AsyncGRPOConfig maps onto asynchronous GRPO on a vLLM
    server even when the recipe sets none of that class's own fields; GRPOConfig reads an
    async recipe's own fields as unmapped; absent, the recipe's fields decide."""

    def convert(recipe: str, config_class: str | None) -> dict[str, Any]:
        body = {"config": (RECIPES / f"{recipe}.yaml").read_text(), "config_class": config_class}
        converted = api.post("/api/specs/convert", json=body)
        assert converted.status_code == 200, converted.text
        return dict(converted.json())

    as_async = convert("open_r1_math", "AsyncGRPOConfig")["spec"]
    assert as_async["async_generation"] is True and as_async["vllm_mode"] == "server"
    assert "async_generation" not in convert("open_r1_math", None)["spec"]
    as_sync = convert("async_grpo_gsm8k", "GRPOConfig")
    assert "async_generation" not in as_sync["spec"]
    assert as_sync["unmapped"]["max_staleness"] == "no equivalent in JobSpec"
    assert convert("async_grpo_gsm8k", None)["spec"]["async_generation"] is True
    wrong = api.post("/api/specs/convert", json={"config": "beta: 0", "config_class": "Async"})
    assert wrong.status_code == 422
    assert wrong.json()["error"]["fields"][0]["loc"].endswith("config_class")


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_bad_configs_are_422_naming_the_config(api: TestClient) -> None:
    for text in ("a: [unclosed", "- just\n- a list\n"):
        refused = api.post("/api/specs/convert", json={"config": text})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["fields"][0]["loc"] == "config"
    assert (
        api.post("/api/specs/convert", json={"config": "beta: 0", "processes": 0}).status_code
        == 422
    )


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_yaml_bomb_is_a_small_422_naming_the_line(api: TestClient) -> None:
    """Issue 38's 407-byte config answered 144 MB: aliases are refused before they expand."""
    bomb = billion_laughs(7)
    refused = api.post("/api/specs/convert", json={"config": bomb})
    assert refused.status_code == 422, refused.text[:300]
    assert len(refused.content) < 1000
    field = refused.json()["error"]["fields"][0]
    assert field == {
        "loc": "config",
        "message": "line 1: YAML anchor &l0 is not accepted (anchors and aliases can expand "
        "a small file without bound): write the value out",
    }
    for text in ("seed: " + "9" * 5000, "a: " + "[" * 100 + "]" * 100):  # 500s before
        assert api.post("/api/specs/convert", json={"config": text}).status_code == 422


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_answer_is_bounded(api: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    config = (RECIPES / "open_r1_math.yaml").read_text()
    size = len(api.post("/api/specs/convert", json={"config": config}).json()["yaml"])
    monkeypatch.setattr(specs, "MAX_ANSWER_CHARS", size - 1)
    refused = api.post("/api/specs/convert", json={"config": config})
    assert refused.status_code == 422
    assert refused.json()["error"]["fields"][0]["message"].startswith(f"converts to {size:,}")


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_converter_needs_a_token_when_tokens_are_configured(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with reads open: a conversion is the server's work (issue 38: it ran for anyone)."""
    monkeypatch.setenv("GRPO_API_TOKENS", "alpha-token,vera:viewer:viewer-token")
    get_settings.cache_clear()
    body = {"config": "beta: 0\nlearning_rate: 1.0e-6\n"}
    with TestClient(create_app(), base_url="http://localhost") as client:
        missing = client.post("/api/specs/convert", json=body)
        assert missing.status_code == 401 and missing.json()["error"]["code"] == "unauthorized"
        wrong = client.post("/api/specs/convert", json=body, headers=_bearer("nope"))
        assert wrong.status_code == 403
        for token in ("alpha-token", "viewer-token"):  # it stores nothing: any role
            ok = client.post("/api/specs/convert", json=body, headers=_bearer(token))
            assert ok.status_code == 200 and ok.json()["spec"]["beta"] == 0
        assert client.get("/api/runs").status_code == 200  # reads stay open
    get_settings.cache_clear()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
