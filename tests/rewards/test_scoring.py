"""One step's scoring with every kind of entry: labels, nulls, plugins (grpo/rewards/scoring.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from grpo.data.example import Example
from grpo.failures import NoApplicableReward, RewardFunctionError
from grpo.report.metrics import reward_scalars
from grpo.rewards.batch import RewardBatch
from grpo.rewards.scoring import Rewarder
from grpo.rewards.trl_call import checked_scores
from grpo.spec import AccuracyReward, JobSpec, PythonReward, RegexReward

EXAMPLES = [
    Example(id="q0", prompt="1+1=", answer="2", data={"lang": "en", "tests": ["assert 1"]}),
    Example(id="q1", prompt="2+2=", answer="4", data={"lang": "fr"}),
]


def _batch(completions: list[str], examples: list[Example] = EXAMPLES) -> RewardBatch:
    return RewardBatch(
        run_id="r",
        step=3,
        examples=examples,
        prompts=[f"P:{e.prompt}" for e in examples],
        completions=completions,
        num_tokens=[len(c) for c in completions],
    )


def test_label_defaults_to_the_name_and_must_be_unique():
    assert AccuracyReward().label == "accuracy"
    assert RegexReward(pattern="x", label="has_x").label == "has_x"
    with pytest.raises(ValidationError, match="labels must be unique"):
        JobSpec(rewards=[{"name": "regex", "pattern": "a"}, {"name": "regex", "pattern": "b"}])
    spec = JobSpec(
        rewards=[
            {"name": "regex", "pattern": "a", "label": "a"},
            {"name": "regex", "pattern": "b", "label": "b"},
        ]
    )
    assert [r.label for r in spec.rewards] == ["a", "b"]


def test_labels_are_metric_safe():
    with pytest.raises(ValidationError, match="label"):
        RegexReward(pattern="x", label="has/slash")


def test_columns_hold_the_answer_and_every_extra_record_field_per_completion():
    batch = _batch(["a", "b", "c", "d"])  # G = 2
    columns = batch.columns()
    assert columns["answer"] == ["2", "2", "4", "4"]
    assert columns["lang"] == ["en", "en", "fr", "fr"]
    assert columns["tests"] == [["assert 1"], ["assert 1"], None, None]


def test_per_label_scores_and_seconds():
    rewarder = Rewarder([AccuracyReward(), RegexReward(pattern="x", label="has_x", weight=0.5)])
    outcome = rewarder.score(_batch(["2", "x", "4", "5"]))
    assert outcome.scores == {"accuracy": [1.0, 0.0, 1.0, 0.0], "has_x": [0.0, 1.0, 0.0, 0.0]}
    assert set(outcome.seconds) == {"accuracy", "has_x"}
    assert rewarder.weights == {"accuracy": 1.0, "has_x": 0.5}


def test_a_completion_no_function_applies_to_is_an_error_naming_labels_and_step():
    failure = NoApplicableReward("judge, lang", 1, ValueError("no applicable reward"))
    message = str(failure.located(step=3, prompt_id="q0"))
    assert "judge, lang" in message and "step 3" in message and "'q0'" in message


def test_metrics_leave_null_scores_out():
    import torch

    scalars = reward_scalars(
        torch.tensor([[1.0, 0.0]]), {"judge": [None, 0.5], "none": [None, None]}
    )
    assert scalars["rewards/judge/mean"] == 0.5 and scalars["rewards/judge/std"] == 0.0
    assert "rewards/none/mean" not in scalars


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ([1.0], "returned 1 values for 2 completions"),
        ("1,2", "not a list"),
        ([1.0, "x"], "value 1 is 'x'"),
        ([True, 1.0], "value 0 is True"),
        ([float("nan"), 1.0], "not a finite number"),
    ],
)
def test_a_function_answer_of_the_wrong_shape_or_type_is_refused(values, problem):
    with pytest.raises(ValueError, match=problem):
        checked_scores(values, expected=2)


def test_checked_scores_keep_none_and_ints():
    assert checked_scores([None, 1], expected=2) == [None, 1.0]


def test_an_unknown_entry_point_is_refused_naming_the_group():
    with pytest.raises(ValueError, match="no reward function 'nope' is installed.*grpo.rewards"):
        Rewarder([PythonReward(function="nope")])


def test_the_example_plugin_is_called_with_trl_signature_and_may_return_none():
    # installed by `make install-test` (examples/reward-plugin)
    rewarder = Rewarder([PythonReward(function="contains_answer")])
    outcome = rewarder.score(_batch(["it is 2", "3", "4", "so 4"]))
    assert outcome.scores["contains_answer"] == [1.0, 0.0, 1.0, 1.0]
    no_answer = [*EXAMPLES, Example(id="q2", prompt="?", answer="")]
    outcome = Rewarder([PythonReward(function="contains_answer"), RegexReward(pattern="x")]).score(
        _batch(["2", "x", "4", "x", "x", "y"], no_answer)
    )
    assert outcome.scores["contains_answer"] == [1.0, 0.0, 1.0, 0.0, None, None]
    with pytest.raises(NoApplicableReward, match="contains_answer"):
        rewarder.score(_batch(["2", "x", "4", "x", "x", "y"], no_answer))


def test_a_rule_that_raises_fails_naming_its_label():
    batch = RewardBatch(
        run_id="r",
        step=1,
        examples=[Example(id="e", prompt="p", answer="")],
        prompts=["p"],
        completions=["1", "2"],
        num_tokens=[1, 1],
    )
    with pytest.raises(RewardFunctionError, match="'accuracy'"):
        Rewarder([AccuracyReward()]).score(batch)


def test_a_whole_batch_failure_names_the_step_only_and_is_located_once():
    failure = RewardFunctionError("judge", None, ValueError("down"))
    located = failure.located(step=2, prompt_id=None)
    assert str(located) == "reward function 'judge' failed at step 2: ValueError: down"
    assert str(located.located(step=9, prompt_id="q9")) == str(located)


def test_chat_prompts_reach_plugins_as_trl_hands_them_over():
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "1+1="}]
    batch = _batch(["2", "3"], [Example(id="c", prompt=chat, answer="2")])
    prompts, completions = batch.trl_prompts_and_completions()
    assert prompts == [chat, chat]
    assert completions == [
        [{"role": "assistant", "content": "2"}],
        [{"role": "assistant", "content": "3"}],
    ]
    outcome = Rewarder([PythonReward(function="contains_answer")]).score(batch)
    assert outcome.scores["contains_answer"] == [1.0, 0.0]


def test_text_prompts_reach_plugins_as_the_records_prompt():
    prompts, completions = _batch(["a", "b", "c", "d"]).trl_prompts_and_completions()
    assert prompts == ["1+1=", "1+1=", "2+2=", "2+2="] and completions == ["a", "b", "c", "d"]


def test_notes_summary_names_prompt_and_place_in_group_of_the_first_three():
    from grpo.rewards.scoring import notes_summary

    notes = {1: "code: killed", 2: "code: raised", 3: "code: raised", 0: "x: y"}
    line = notes_summary(notes, _batch(["a", "b", "c", "d"]))
    assert line.startswith("step 3 rewards: prompt 'q0' completion 1: code: killed; ")
    assert "prompt 'q1' completion 0: code: raised" in line and line.endswith("(and 1 more)")
