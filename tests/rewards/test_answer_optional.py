"""data.answer_field: null: records without a reference answer train with rewards that need
none; an entry that needs one (accuracy, exact_match) is refused naming it."""

from __future__ import annotations

import pytest

from grpo.data.example import Example
from grpo.data.records import RecordError, parse_record
from grpo.rewards.batch import RewardBatch
from grpo.rewards.registry import REWARD_KINDS, answer_refusals, check_answers_present
from grpo.spec import JobSpec

NO_ANSWER = {"source": "data.jsonl", "answer_field": None}


def test_only_the_answer_rules_need_an_answer() -> None:
    needing = sorted(name for name, kind in REWARD_KINDS.items() if kind.needs_answer)
    assert needing == ["accuracy", "exact_match"]


@pytest.mark.parametrize(
    ("rewards", "refused"),
    [
        ([{"name": "accuracy"}], ["rewards.0"]),
        ([{"name": "format"}, {"name": "exact_match"}], ["rewards.1"]),
        ([{"name": "http", "url": "http://judge/score"}, {"name": "length"}], []),
        ([{"name": "python", "function": "polite"}], []),
    ],
)
def test_entries_needing_an_answer_are_named(
    rewards: list[dict[str, object]], refused: list[str]
) -> None:
    spec = JobSpec(data=NO_ANSWER, rewards=rewards)
    assert [loc for loc, _ in answer_refusals(spec)] == refused
    if refused:
        with pytest.raises(
            ValueError, match=rf"^{refused[0]}: reward .* data.answer_field is null"
        ):
            check_answers_present(spec)
    else:
        check_answers_present(spec)


def test_eval_rewards_are_checked_against_the_eval_answer_field() -> None:
    spec = JobSpec(
        data=NO_ANSWER,
        rewards=[{"name": "format"}],
        eval={"source": "heldout.jsonl", "rewards": [{"name": "accuracy"}]},
    )
    assert [loc for loc, _ in answer_refusals(spec)] == ["eval.rewards.0"]
    with_answer = spec.model_copy(
        update={"eval": spec.eval.model_copy(update={"answer_field": "gold"})}
    )  # type: ignore[union-attr]
    assert answer_refusals(with_answer) == []


def test_a_record_without_an_answer_parses_and_reward_functions_get_no_answer_column() -> None:
    record = parse_record(
        {"prompt": "hi", "lvl": 3}, prompt_field="prompt", answer_field=None, where="x"
    )
    assert (record.answer, record.data) == ("", {"lvl": 3})
    with pytest.raises(RecordError, match="missing field 'answer'"):
        parse_record({"prompt": "hi"}, prompt_field="prompt", answer_field="answer", where="x")
    example = Example(id="0", prompt="hi", answer="", data={"lvl": 3})
    batch = RewardBatch("r", 1, [example], ["hi"], ["a", "b"], [1, 1], answer_field=None)
    assert batch.columns() == {"lvl": [3, 3]}
