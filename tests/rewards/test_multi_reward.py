"""`multi` rewards (grpo/rewards/multi.py): a formula over the other entries' scores, worked
by hand through the Rewarder a worker uses and a reward test's Trial; null where a score it
reads is null or it divides by zero; every formula that is not numbers, labels, + - * /,
unary -, min, max, abs and parentheses refused naming the field and the piece, in the spec
and by the API at submit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.main import create_app
from grpo.data.example import Example
from grpo.rewards.batch import RewardBatch
from grpo.rewards.rules import total_rewards
from grpo.rewards.scoring import Rewarder
from grpo.rewards.trial import Sample, Trial
from grpo.rewards.trial_report import ServerPaths
from grpo.spec import JobSpec
from tests.store_fixture import store

__all__ = ["store"]

FOUR = Example(id="p", prompt="2+2=", answer="4")
COMPLETIONS = ["<answer>4</answer>", "<answer>5</answer>", "4", "nothing"]
# accuracy: 1, 0, 1, 0; tags (<answer> found): 1, 1, 0, 0
BASE = [
    {"name": "accuracy", "weight": 0},
    {"name": "regex", "pattern": "<answer>", "label": "tags", "weight": 0},
]


def scored(formula: str, **extra: object) -> tuple[list[float | None], dict[int, str]]:
    spec = JobSpec.model_validate(
        {"rewards": [*BASE, {"name": "multi", "label": "m", "formula": formula}], **extra}
    )
    batch = RewardBatch(run_id="r", step=1, examples=[FOUR], prompts=["2+2="],
                        completions=COMPLETIONS, num_tokens=[4] * 4)  # fmt: skip
    outcome = Rewarder(spec.rewards).score(batch)
    return outcome.scores["m"], outcome.notes


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("min(tags, accuracy)", [1.0, 0.0, 0.0, 0.0]),
        ("tags * accuracy", [1.0, 0.0, 0.0, 0.0]),
        ("max(tags, accuracy)", [1.0, 1.0, 1.0, 0.0]),
        ("accuracy + 0.2 * min(tags, accuracy)", [1.2, 0.0, 1.0, 0.0]),
        ("-abs(tags - accuracy) / 2", [-0.0, -0.5, -0.5, -0.0]),
        ("(accuracy - 1) * -3 + max(1, 2, tags)", [2.0, 5.0, 2.0, 5.0]),
    ],
)
def test_a_formula_combines_the_scores_worked_by_hand(formula: str, expected: list[float]) -> None:
    scores, notes = scored(formula)
    assert scores == pytest.approx(expected) and notes == {}


def test_weighted_zero_the_entries_it_reads_leave_the_total_to_the_formula() -> None:
    product = {"name": "multi", "formula": "tags * accuracy"}
    spec = JobSpec.model_validate({"rewards": [*BASE, product]})
    rewarder = Rewarder(spec.rewards)
    batch = RewardBatch(run_id="r", step=1, examples=[FOUR], prompts=["2+2="],
                        completions=COMPLETIONS, num_tokens=[4] * 4)  # fmt: skip
    outcome = rewarder.score(batch)
    assert list(outcome.scores) == ["accuracy", "tags", "multi"]
    assert total_rewards(outcome.scores, rewarder.weights) == [1.0, 0.0, 0.0, 0.0]


def test_a_division_by_zero_is_null_with_a_note_and_a_null_score_is_null() -> None:
    scores, notes = scored("accuracy / tags")
    assert scores == [1.0, 0.0, None, None]
    said = "m: accuracy / tags divides by zero or overflows here: null"
    assert notes == {2: said, 3: said}
    spec = JobSpec.model_validate({"rewards": [
        BASE[0], {"name": "python", "function": "sometimes", "weight": 0},
        {"name": "multi", "label": "m", "formula": "2 * sometimes"},
    ]})  # fmt: skip
    rewarder = Rewarder(spec.rewards, functions={"sometimes": lambda completions, **_: [
        None if c == "4" else 1.0 for c in completions]})  # fmt: skip
    batch = RewardBatch(run_id="r", step=1, examples=[FOUR], prompts=["2+2="],
                        completions=COMPLETIONS, num_tokens=[4] * 4)  # fmt: skip
    assert rewarder.score(batch).scores["m"] == [2.0, 2.0, None, 2.0]


def test_a_reward_test_scores_it_after_the_functions_it_reads(tmp_path: Path) -> None:
    spec = JobSpec.model_validate(
        {"rewards": [{"name": "multi", "label": "m", "formula": "min(tags, accuracy)"}, *BASE]}
    )
    trial = Trial.of_entries(
        spec.rewards, ServerPaths(cache_dir=str(tmp_path), local_path_base=str(tmp_path))
    )
    results = [
        trial.score(Sample(FOUR, text, 4), answer_field="answer", call_seconds=5)
        for text in COMPLETIONS[:2]
    ]
    assert [r.scores for r in results] == [
        {"m": 1.0, "accuracy": 1.0, "tags": 1.0}, {"m": 0.0, "accuracy": 0.0, "tags": 1.0}
    ]  # fmt: skip
    assert all(not r.failures for r in results)


@pytest.mark.parametrize(
    ("formula", "piece"),
    [
        ("accuracy ** 2", "`**` is not allowed"),
        ("__import__('os').system('true')", "`__import__('os').system` is not allowed"),
        ("eval('1')", "`eval` is not allowed"),
        ("accuracy.real", "`accuracy.real` is not allowed"),
        ("'accuracy'", "`'accuracy'` is not allowed"),
        ("True", "`True` is not allowed"),
        ("accuracy if tags else 0", "`accuracy if tags else 0` is not allowed"),
        ("accuracy > 0", "`accuracy > 0` is not allowed"),
        ("[accuracy][0]", "`[accuracy][0]` is not allowed"),
        ("lambda: 1", "`lambda: 1` is not allowed"),
        ("+accuracy", "`unary +` is not allowed"),
        ("accuracy % 2", "`%` is not allowed"),
        ("min(accuracy, key=tags)", "`min(accuracy, key=tags)` is not allowed"),
        ("min(accuracy)", "min() takes at least 2 arguments"),
        ("abs(accuracy, tags)", "abs() takes one argument"),
        ("min(accuracy,", "not a formula: '(' was never closed"),
        ("(" * 300 + "1" + ")" * 199, "not a formula"),
    ],
)
def test_anything_but_arithmetic_over_labels_is_refused_naming_the_piece(
    formula: str, piece: str
) -> None:
    entry = {"name": "multi", "formula": formula}
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate({"rewards": [*BASE, entry]})
    (error,) = caught.value.errors()
    assert error["loc"][:4] == ("rewards", 2, "multi", "formula"), error
    assert piece in error["msg"], error["msg"]


def test_a_label_that_is_not_another_entry_is_refused_naming_it() -> None:
    for formula, name in [("min(format, accuracy)", "format"), ("2 * m", "m")]:
        entry = {"name": "multi", "label": "m", "formula": formula}
        with pytest.raises(ValidationError) as caught:
            JobSpec.model_validate({"rewards": [*BASE, entry]})
        (error,) = caught.value.errors()
        assert error["loc"] == ("rewards", 2, "multi", "formula")
        assert error["msg"] == (
            f"`{name}` is not the label of another entry (it may read `accuracy`, `tags`)"
        )


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_submit_refuses_a_bad_formula_with_a_422_naming_the_field(api: TestClient) -> None:
    for formula, says in [
        ("accuracy ** 2", "`**` is not allowed"),
        ("min(format, accuracy)", "`format` is not the label of another entry"),
    ]:
        spec = {"model": "builtin:tiny", "rewards": [*BASE, {"name": "multi", "formula": formula}]}
        response = api.post("/api/runs", json=spec)
        assert response.status_code == 422, response.text
        (field,) = response.json()["error"]["fields"]
        assert field["loc"] == "rewards.2.multi.formula" and says in field["message"], field
    product = {"name": "multi", "formula": "tags * accuracy"}
    good = {"model": "builtin:tiny", "rewards": [*BASE, product]}
    assert api.post("/api/runs", json=good).status_code == 201
