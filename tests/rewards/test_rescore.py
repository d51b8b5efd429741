"""Replaying a run under other rewards (POST /api/runs/{id}/rescore): the real routes, the
real store (PostgreSQL and SQLite), the worker's replay function called as its task calls
it (the filesystem broker's message is never consumed here).

A finished tiny run replayed under its own rewards gives back its stored rewards and
advantages to the bit; a hand-made step replayed under `accuracy` instead of `exact_match`
flips exactly the completion worked out by hand; bad requests are 4xx naming the field and
leave the run as it was."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.routes import rescores as rescore_routes
from app.main import create_app
from app.store import db, rescores, runs, steps
from grpo.report import CompletionReport, GroupReport, StepReport
from tests.store_fixture import store
from worker.job import run_job
from worker.rescore import rescore_job

__all__ = ["store"]

TINY_RUN = {
    "name": "replay-tiny",
    "model": "builtin:tiny",
    "max_steps": 2,
    "prompts_per_step": 2,
    "num_generations": 4,
    "max_completion_length": 6,
    "save_steps": 0,
    "logging": {"max_groups_per_step": 2},
    "rewards": [
        {"name": "regex", "pattern": "[0-9]"},
        {"name": "length", "max_length": 6, "cache_length": 5, "weight": 0.5},
    ],
}


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def submit(api: TestClient, spec: dict[str, Any]) -> str:
    response = api.post("/api/runs", json=spec)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def replay(api: TestClient, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Ask for a replay, run it as the worker's task does, read it back."""
    asked = api.post(f"/api/runs/{run_id}/rescore", json=body)
    assert asked.status_code == 202, asked.text
    assert asked.json()["status"] == "queued"
    rescore_job(asked.json()["id"])
    read = api.get(f"/api/runs/{run_id}/rescores/{asked.json()['id']}")
    assert read.status_code == 200, read.text
    return dict(read.json())


@pytest.mark.parametrize("store", ["postgres"], indirect=True)  # training is the cost; once
def test_a_replay_under_the_runs_own_rewards_reproduces_its_rewards_and_advantages(
    api: TestClient,
) -> None:
    run_id = submit(api, TINY_RUN)
    run_job(run_id)
    assert api.get(f"/api/runs/{run_id}").json()["status"] == "succeeded"
    stored = {
        (step, g["index"]): g
        for step in (1, 2)
        for g in db.call(rescores.stored_groups, run_id, step)
    }
    done = replay(api, run_id, {"rewards": TINY_RUN["rewards"], "steps": None})
    assert done["status"] == "succeeded", done["error"]
    assert done["steps"] == [1, 2] and len(done["groups"]) == 4
    for group in done["groups"]:
        kept = stored[(group["step"], group["group_index"])]
        for mine, theirs in zip(group["completions"], kept["completions"], strict=True):
            assert mine["rewards"] == theirs["rewards"]
            assert (mine["reward"], mine["advantage"]) == (theirs["reward"], theirs["advantage"])
            assert (mine["reward_before"], mine["advantage_before"]) == (
                theirs["reward"],
                theirs["advantage"],
            )
        assert group["flips"] == []
    advantages = [c["advantage"] for g in done["groups"] for c in g["completions"]]
    assert any(a != 0 for a in advantages), "no group with signal: the check would be empty"
    summary = done["summary"]
    assert (summary["completions"], summary["flipped_groups"]) == (16, 0)
    assert summary["reward"] == summary["reward_before"]
    assert summary["advantage"] == summary["advantage_before"]
    listed = api.get(f"/api/runs/{run_id}/rescores").json()["items"]
    assert [r["id"] for r in listed] == [done["id"]]


def completion(text: str, reward: float, advantage: float) -> CompletionReport:
    return CompletionReport(
        text=text, num_tokens=len(text), is_truncated=False, rewards={"exact_match": reward},
        reward=reward, advantage=advantage, kl=0.0,
    )  # fmt: skip


def hand_made_run(api: TestClient) -> str:
    """A run (never trained) with one stored step of two groups of G = 4 under exact_match:
    group 0 (answer 4): "4" passes; mean 1/4, population std sqrt(3)/4, so the advantages
    are +sqrt(3) and three -1/sqrt(3); group 1 (answer 9) fails throughout: all 0."""
    spec = {
        **TINY_RUN, "max_steps": 1, "rewards": [{"name": "exact_match"}],
        "data": {"source": "builtin:arith", "answer_field": "answer"},
    }  # fmt: skip
    run_id = submit(api, spec)
    up, down = math.sqrt(3), -1 / math.sqrt(3)
    texts = ["4", "5", "<answer>4</answer>", "x"]
    group0 = GroupReport(
        index=0, prompt_id="hand-0", prompt="2+2=", answer="4", rewards=[1.0, 0.0, 0.0, 0.0],
        advantages=[up, down, down, down], passes=[True, False, False, False],
        completions=[completion(t, float(t == "4"), up if t == "4" else down) for t in texts],
    )  # fmt: skip
    group1 = GroupReport(
        index=1, prompt_id="hand-1", prompt="4+5=", answer="9", rewards=[0.0] * 4,
        advantages=[0.0] * 4, passes=[False] * 4,
        completions=[completion(t, 0.0, 0.0) for t in ["1", "2", "3", "<answer>8</answer>"]],
    )  # fmt: skip
    report = StepReport(step=1, total_steps=1, scalars={"reward": 0.125}, groups=[group0, group1])
    db.call(steps.save_step, run_id, report)
    return run_id


def test_a_changed_reward_flips_the_completion_worked_out_by_hand(api: TestClient) -> None:
    """Under `accuracy` (the <answer> tag, else the last number) group 0 scores 1, 0, 1, 0:
    mean 1/2, std 1/2, advantages +1, -1, +1, -1. Completion 2 goes from -1/sqrt(3) to +1
    (change 1 + 1/sqrt(3)); the others keep their signs. Group 1 still fails throughout."""
    run_id = hand_made_run(api)
    done = replay(api, run_id, {"rewards": [{"name": "accuracy"}], "steps": [1]})
    assert done["status"] == "succeeded", done["error"]
    group0, group1 = done["groups"]
    assert [c["rewards"] for c in group0["completions"]] == [
        {"accuracy": 1.0}, {"accuracy": 0.0}, {"accuracy": 1.0}, {"accuracy": 0.0}
    ]  # fmt: skip
    after = [c["advantage"] for c in group0["completions"]]
    assert after == pytest.approx([1.0, -1.0, 1.0, -1.0], abs=1e-6)
    (flip,) = group0["flips"]
    assert flip["completion"] == 2
    assert flip["advantage_before"] == pytest.approx(-1 / math.sqrt(3), abs=1e-6)
    assert flip["change"] == pytest.approx(1 + 1 / math.sqrt(3), abs=1e-6)
    assert group1["flips"] == [] and {c["advantage"] for c in group1["completions"]} == {0.0}
    summary = done["summary"]
    assert (summary["groups"], summary["flipped_groups"], summary["flipped_completions"]) == (
        2, 1, 1
    )  # fmt: skip
    assert summary["reward_before"]["mean"] == pytest.approx(1 / 8)
    assert summary["reward"]["mean"] == pytest.approx(2 / 8)
    # the same 20 bins from 0 to 1 before and after: seven 0s and a 1, then six 0s and two 1s
    assert summary["reward"]["edges"] == summary["reward_before"]["edges"]
    assert summary["reward_before"]["counts"] == [7] + [0] * 18 + [1]
    assert summary["reward"]["counts"] == [6] + [0] * 18 + [2]
    assert api.post(f"/api/runs/{run_id}/cancel").status_code == 200
    assert api.delete(f"/api/runs/{run_id}").status_code == 204  # its replays go with it
    assert api.get(f"/api/runs/{run_id}/rescores").status_code == 404
    assert db.call(rescores.rescore_groups, done["id"]) == []


def refused(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    return dict(response.json()["error"])


def test_bad_replay_requests_are_refused_naming_the_field_and_leave_the_run_as_it_was(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = hand_made_run(api)
    before = api.get(f"/api/runs/{run_id}").json()
    url = f"/api/runs/{run_id}/rescore"
    accuracy = [{"name": "accuracy"}]
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"rewards": [], "steps": None}, 422, "rewards"),
        ({"rewards": [{"name": "nope"}]}, 422, "rewards"),
        ({"rewards": accuracy, "steps": [2]}, 422, "steps"),
        ({"rewards": accuracy, "steps": [0]}, 422, "steps"),
        ({"rewards": accuracy, "steps": list(range(1, 1002))}, 422, "steps"),
        ({"rewards": accuracy, "extra": 1}, 422, "extra"),
        (
            {"rewards": [{"name": "http", "url": "http://judge.example:8000/score"}]},
            422,
            "rewards.0.url",
        ),
        ({"rewards": [{"name": "accuracy"}, {"name": "accuracy"}]}, 422, "rewards"),
    ]
    for body, status, loc in cases:
        error = refused(api.post(url, json=body), status)
        assert any(loc in f["loc"] for f in error.get("fields") or []), (body, error)
    monkeypatch.setattr(rescore_routes, "MAX_RESCORE_COMPLETIONS", 7)  # the step holds 8
    error = refused(api.post(url, json={"rewards": accuracy}), 422)
    assert "8 stored completions" in error["message"]
    empty = submit(api, {**TINY_RUN, "name": "never-trained"})
    assert (
        "no stored completions"
        in refused(api.post(f"/api/runs/{empty}/rescore", json={"rewards": accuracy}), 409)[
            "message"
        ]
    )
    assert refused(api.get(f"/api/runs/{run_id}/rescores/99"), 404)
    assert api.get(f"/api/runs/{run_id}/rescores").json()["items"] == []
    assert api.get(f"/api/runs/{run_id}").json() == before


def test_a_replay_whose_reward_fails_is_failed_with_its_message(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An allowed endpoint that does not answer: the replay fails saying so, the run stays."""
    monkeypatch.setenv("GRPO_REWARD_HOSTS", "127.0.0.1:9")
    from app.settings import get_settings

    get_settings.cache_clear()
    run_id = hand_made_run(api)
    before = db.call(runs.get_run, run_id)
    http = {"name": "http", "url": "http://127.0.0.1:9/score", "max_retries": 0, "timeout_s": 2}
    done = replay(api, run_id, {"rewards": [http]})
    assert done["status"] == "failed" and done["summary"] is None
    assert "reward function 'http' failed" in done["error"], done["error"]
    after = db.call(runs.get_run, run_id)
    assert before is not None and after is not None
    assert (after.status, after.step, after.spec) == (before.status, before.step, before.spec)


def test_asking_for_a_replay_is_for_the_runs_owner_or_an_admin(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As every other write to a run: a viewer and another member are refused (403), the
    owner and an admin are not; reading follows the read rule."""
    monkeypatch.setenv(
        "GRPO_API_TOKENS", "ann:admin:ann-token,mia:member:mia-token,max:member:max-token,"
        "vic:viewer:vic-token",
    )  # fmt: skip
    from app.settings import get_settings

    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as api:
        api.headers["Authorization"] = "Bearer mia-token"
        run_id = hand_made_run(api)
        url, body = f"/api/runs/{run_id}/rescore", {"rewards": [{"name": "accuracy"}]}
        for token, status in [("vic-token", 403), ("max-token", 403), ("", 401)]:
            headers = {"Authorization": f"Bearer {token}"} if token else {"Authorization": ""}
            assert api.post(url, json=body, headers=headers).status_code == status, token
        for token in ("mia-token", "ann-token"):
            asked = api.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
            assert asked.status_code == 202, asked.text
        assert [
            r["submitted_by"] for r in api.get(f"/api/runs/{run_id}/rescores").json()["items"]
        ] == ["mia", "ann"]
