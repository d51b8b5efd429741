"""POST /api/specs/convert in the test process (TestClient over the real app and store):
three GRPOConfig YAMLs written like public recipes become specs that POST /api/runs takes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import get_settings
from tests.integration.store_fixture import store

__all__ = ["store"]
RECIPES = Path(__file__).parents[1] / "data" / "trl_recipes"


@pytest.fixture
def api(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The recipes name hub models this machine does not have: the API's hub check is off,
    as on a server whose workers keep their own caches (tests/integration/test_hub_models.py
    covers the check)."""
    monkeypatch.setenv("GRPO_CHECK_HUB_MODELS", "false")
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.parametrize("recipe", ["open_r1_math", "trl_docs_dapo", "lora_gsm8k"])
def test_a_converted_recipe_passes_submit(api: TestClient, recipe: str) -> None:
    config = (RECIPES / f"{recipe}.yaml").read_text()
    converted = api.post("/api/specs/convert", json={"config": config})
    assert converted.status_code == 200, converted.text
    body = converted.json()
    assert body["unmapped"] and "# Not mapped:" in body["yaml"]
    submitted = api.post("/api/runs", json=body["spec"])
    assert submitted.status_code == 201, submitted.text


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
