"""POST /api/rewards/preflight: the real app in this process and the scoring process it
starts, on the built-in arithmetic records. A format reward that pays for the tags alone is
found, the built-in accuracy reward is not, a function that crashes on an empty completion
is named, and what a submit would refuse is a 422 naming the field."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from grpo.rewards.trial_report import PROBES
from tests.rewards.test_reward_trials import api, store

__all__ = ["api", "store"]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_reward_paying_for_tags_alone_is_found_and_accuracy_has_no_hole(
    api: TestClient,
) -> None:
    rewards = [
        {"name": "accuracy"},
        {"name": "regex", "pattern": "<answer>", "label": "tags"},
        {"name": "python", "function": "crashes", "weight": 0},
    ]
    spec = {"model": "builtin:tiny", "rewards": rewards}
    response = api.post("/api/rewards/preflight", json={"spec": spec, "records": 3})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["records"] == 3 and report["stopped"] is None
    assert [p["probe"] for p in report["probes"][:10]] == [
        "empty", "whitespace", "prompt_echo", "truncated", "judge_injection",
        "correct", "answer_only", "format_wrong_answer", "answer_repeated", "very_long",
    ]  # fmt: skip
    assert {p["probe"] for p in report["probes"]} == set(PROBES) and len(report["probes"]) == 30
    correct = [p for p in report["probes"] if p["probe"] == "correct"]
    assert all(p["result"]["scores"]["accuracy"] == 1.0 for p in correct)
    found = {(f["label"], f["probe"]): f for f in report["findings"]}
    assert not [label for label, _ in found if label == "accuracy"]
    tags = found[("tags", "format_wrong_answer")]
    assert (tags["score"], tags["correct_score"]) == (1.0, 1.0)
    assert tags["message"] == (
        "format-only completions (the format around a wrong answer) score 1 on `tags` — the "
        "model can earn 50% of the total reward of a correct completion without solving anything"
    )
    crash = found[("crashes", "empty")]
    assert crash["score"] is None and "ZeroDivisionError" in crash["message"]
    assert "a run fails at the first step that samples one" in crash["message"]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_what_submit_refuses_and_too_many_records_are_422s_naming_the_field(
    api: TestClient,
) -> None:
    spec = {"model": "builtin:tiny", "rewards": [{"name": "http", "url": "http://judge.example/s"}]}
    response = api.post("/api/rewards/preflight", json={"spec": spec, "records": 2})
    assert response.status_code == 422, response.text
    assert [f["loc"] for f in response.json()["error"]["fields"]] == ["spec.rewards.0.url"]
    for records in (0, 9):
        body = {"spec": {"model": "builtin:tiny"}, "records": records}
        response = api.post("/api/rewards/preflight", json=body)
        assert response.status_code == 422 and "records" in response.text
