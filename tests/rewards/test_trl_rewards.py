"""`python` reward functions called exactly as TRL's GRPOTrainer calls them
(grpo/rewards/trl_call.py): columns under their own names, completion_ids, trainer_state,
log_metric, log_extra, async functions run concurrently, errors naming label/step/argument."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import warnings
from typing import Any

import pytest

from grpo.data.example import Example
from grpo.failures import RewardFunctionError
from grpo.rewards.batch import RewardBatch, TrainerState
from grpo.rewards.scoring import Rewarder
from grpo.spec import PythonReward

EXAMPLES = [
    Example(id="q0", prompt=[{"role": "user", "content": "1+1="}], answer="2", data={"lvl": 1}),
    Example(id="q1", prompt=[{"role": "user", "content": "2+2="}], answer="4", data={"lvl": 2}),
]
STATE = TrainerState(global_step=4, max_steps=10, epoch=0.5)


def _batch(completions: list[str]) -> RewardBatch:
    return RewardBatch(
        run_id="r",
        step=5,
        examples=EXAMPLES,
        prompts=["P0", "P1"],
        completions=completions,
        num_tokens=[len(c) for c in completions],
        completion_ids=[[ord(ch) for ch in c] for c in completions],
        trainer_state=STATE,
        answer_field="solution",
    )


def _rewarder(**functions: Any) -> Rewarder:
    entries = [PythonReward(function=name, label=name) for name in functions]
    return Rewarder(entries, functions=functions)


def test_every_column_arrives_under_its_own_name_with_ids_state_and_trl_forms() -> None:
    seen: dict[str, Any] = {}

    def recipe(prompts, completions, completion_ids, solution, trainer_state, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(kwargs, prompts=prompts, completions=completions, ids=completion_ids)
        seen.update(solution=solution, state=trainer_state)
        return [float(c[0]["content"] == s) for c, s in zip(completions, solution, strict=True)]

    outcome = _rewarder(recipe=recipe).score(_batch(["2", "3", "4", "4"]))
    assert outcome.scores["recipe"] == [1.0, 0.0, 1.0, 1.0]
    assert seen["solution"] == seen["answer"] == ["2", "2", "4", "4"]
    assert seen["lvl"] == [1, 1, 2, 2]
    assert seen["ids"] == [[50], [51], [52], [52]]
    assert seen["completions"][1] == [{"role": "assistant", "content": "3"}]
    assert seen["prompts"][2] == [{"role": "user", "content": "2+2="}]
    assert (seen["state"].global_step, seen["state"].max_steps, seen["state"].epoch) == (4, 10, 0.5)
    assert callable(seen["log_metric"]) and callable(seen["log_extra"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen["state"].global_step = 0  # read-only


def test_log_metric_is_the_steps_mean_and_log_extra_a_column_per_completion() -> None:
    def logs(completions, log_metric, log_extra, **kwargs):  # type: ignore[no-untyped-def]
        log_metric("calls", 1.0)
        log_metric("calls", 3.0)
        log_extra("first_char", [c[0]["content"][0] for c in completions])
        return [0.5] * len(completions)

    outcome = _rewarder(logs=logs).score(_batch(["ab", "cd", "ef", "gh"]))
    assert outcome.metrics == {"rewards/logs/calls": 2.0}  # (1 + 3) / 2
    assert [outcome.extras[i]["first_char"] for i in range(4)] == ["a", "c", "e", "g"]


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda kw: kw["log_metric"]("a/b", 1.0), "no slash"),
        (lambda kw: kw["log_metric"]("mean", 1.0), "own score statistic"),
        (lambda kw: kw["log_metric"]("x", float("nan")), "not a finite number"),
        (lambda kw: kw["log_extra"]("col", [1]), "got 1 values for 4 completions"),
    ],
)
def test_bad_logs_fail_naming_label_step_and_what_is_wrong(call: Any, problem: str) -> None:
    def fn(**kwargs: Any) -> list[float]:
        call(kwargs)
        return [0.0] * 4

    with pytest.raises(RewardFunctionError) as failure:
        _rewarder(fn=fn).score(_batch(["a", "b", "c", "d"]))
    assert problem in str(failure.value)
    assert "'fn'" in str(failure.value) and "at step 5" in str(failure.value)


def test_a_missing_column_names_label_step_and_the_argument() -> None:
    def needs_gold(completions, gold, **kwargs):  # type: ignore[no-untyped-def]
        return [0.0] * len(completions)

    with pytest.raises(RewardFunctionError) as failure:
        _rewarder(judge=needs_gold).score(_batch(["a", "b", "c", "d"]))
    message = str(failure.value)
    assert "'judge'" in message and "at step 5" in message
    assert "argument 'gold'" in message and "solution" in message  # what is passed


def test_async_functions_are_awaited_concurrently_with_each_other() -> None:
    wait = 0.3
    order: list[str] = []  # awaited one after the other: start, end, start, end

    async def judge(completions, **kwargs):  # type: ignore[no-untyped-def]
        order.append("start")
        await asyncio.sleep(wait)
        order.append("end")
        return [1.0] * len(completions)

    async def second(completions, **kwargs):  # type: ignore[no-untyped-def]
        return await judge(completions)

    def plain(completions, **kwargs):  # type: ignore[no-untyped-def]
        return [0.0] * len(completions)

    rewarder = _rewarder(judge=judge, plain=plain, second=second)
    outcome = rewarder.score(_batch(["a", "b", "c", "d"]))
    assert outcome.scores["judge"] == outcome.scores["second"] == [1.0] * 4
    assert list(outcome.scores) == ["judge", "plain", "second"]  # the spec's order
    assert order == ["start", "start", "end", "end"]  # the two waits overlapped
    assert outcome.seconds["judge"] >= wait


def test_async_functions_run_from_inside_a_running_event_loop() -> None:
    async def judge(completions, **kwargs):  # type: ignore[no-untyped-def]
        return [1.0] * len(completions)

    async def notebook_cell() -> list[float | None]:
        return _rewarder(judge=judge).score(_batch(["a", "b", "c", "d"])).scores["judge"]

    assert asyncio.run(notebook_cell()) == [1.0] * 4


def test_an_async_function_that_raises_names_its_label_and_step() -> None:
    async def broken(completions, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyError("boom")

    with pytest.raises(RewardFunctionError, match=r"'broken' failed at step 5: KeyError"):
        _rewarder(broken=broken).score(_batch(["a", "b", "c", "d"]))


def test_a_plain_function_failing_leaves_no_async_one_unawaited() -> None:
    async def judge(completions, **kwargs):  # type: ignore[no-untyped-def]
        return [1.0] * len(completions)

    def broken(completions, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("down")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RewardFunctionError, match="'broken' failed at step 5"):
            _rewarder(judge=judge, broken=broken).score(_batch(["a", "b", "c", "d"]))
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
