"""Rewards see the trajectory (issue 28, point 4): a `python` reward gets TRL's
conversational completion (assistant and tool messages), `tool_calls`, `tool_results` and,
with an environment, `environments`; all through the real loop, kind and entry points."""

import re

from grpo.data.example import Example
from grpo.data.tools_task import tool_call_text
from grpo.rewards.batch import RewardBatch
from grpo.rewards.kind import RunFacts
from grpo.rewards.python import PYTHON
from grpo.spec.rewards import PythonReward
from grpo.spec.tools import EnvironmentTool
from tests.tools.test_tool_loop import loop, request, tok

__all__ = ["tok"]  # the fixture


def reply(context: str) -> str:
    """Row of `12*34=`: calls, then writes the result; of `2*3=`: calls, then writes 7."""
    results = re.findall(r"<tool_response>(.*?)</tool_response>", context)
    if not results:
        return tool_call_text(context.split("]")[-1].rstrip("="))
    return results[-1] if "12*34" in context else "7"


def scored(tok, function, tools=None):
    knobs = {} if tools is None else {"tools": tools}
    engine, _ = loop(tok, reply, **knobs)
    records = [{"prompt": "12*34=", "answer": "408"}, {"prompt": "2*3=", "answer": "6"}]
    rollout = engine.generate(
        request(tok, prompts=("12*34=", "2*3="), g=1, seeds=(1, 2), records=records)
    )
    batch = RewardBatch(
        run_id="r",
        step=1,
        examples=[Example("a", "12*34=", "408"), Example("b", "2*3=", "6")],
        prompts=["12*34=", "2*3="],
        completions=["", ""],
        num_tokens=[0, 0],
        trajectories=rollout.trajectories,
    )
    scorer = PYTHON.prepare(PythonReward(function=function), RunFacts(cache_dir="/tmp"))
    return scorer(batch, {}), batch


def test_the_reward_reads_the_last_assistant_message_not_the_tool_result(tok):
    scores, batch = scored(tok, "final_answer")
    # the second trajectory's tool said 6, its model wrote 7: the tool's text earns nothing
    assert scores == [1.0, 0.0]
    _, completions = batch.trl_prompts_and_completions()
    assert [m["role"] for m in completions[1]] == ["assistant", "tool", "assistant"]
    assert completions[1][1]["content"] == "6" and completions[1][2]["content"] == "7"
    columns = batch.trajectory_columns()
    assert columns["tool_calls"][0] == [
        {"name": "calc", "arguments": {"x": "12*34"}, "error": None}
    ]
    assert columns["tool_results"][1] == [{"name": "calc", "content": "6", "is_error": False}]
    assert "environments" not in columns


def test_environments_reach_the_reward_functions(tok):
    scores, batch = scored(tok, "used_tool", tools=(EnvironmentTool(environment="calculator"),))
    assert scores == [1.0, 1.0]
    environments = batch.trajectory_columns()["environments"]
    assert [e.problem for e in environments] == ["12*34=", "2*3="]
