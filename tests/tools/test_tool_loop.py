"""The multi-turn tool loop (grpo/engines/tool_loop.py) over a scripted engine and real
tools: trajectories, the tool mask counted by hand, errors as tool messages, the iteration
and token limits, per-trajectory seeds, environments, and the sandboxed code tool."""

import json
import re

import pytest
import torch

from grpo.data.tools_task import tool_call_text
from grpo.engines.engine import GenerationRequest
from grpo.engines.tool_loop import ToolLoop, trajectory_seed
from grpo.models.tool_template import build_tool_tokenizer
from grpo.report.tool_metrics import tool_counts, tool_scalars
from grpo.rollout.rollout import tokenize_prompts
from grpo.spec.generation import Sampling
from grpo.spec.tools import CodeTool, EnvironmentTool, PythonTool
from grpo.tools.kind import ToolRunFacts
from grpo.tools.toolbox import Toolbox
from tests.tools.tool_engine import ScriptedEngine

CALL = tool_call_text("12*34")  # 64 characters, one token each


@pytest.fixture(scope="module")
def tok():
    return build_tool_tokenizer()


def calculator_user(context: str) -> str:
    """Calls calc once, then answers with the tool's result."""
    results = re.findall(r"<tool_response>(.*?)</tool_response>", context)
    return results[-1] if results else CALL


CALC = (PythonTool(function="calc"),)


def loop(tok, reply, tools=CALC, **knobs):
    toolbox = Toolbox(tools, ToolRunFacts(), max_result_chars=knobs.pop("max_chars", 2000))
    engine = ScriptedEngine(tok, reply, with_logps=knobs.pop("with_logps", False))
    knobs = {"max_iterations": None, "concurrency": 4, **knobs}
    return ToolLoop(engine, toolbox, tok, eos_token_ids=[tok.eos_token_id], **knobs), engine


def request(tok, prompts=("12*34=",), g=2, budget=100, seeds=(7,), records=None):
    texts = [
        tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False) for p in prompts
    ]
    ids, mask = tokenize_prompts(
        tok, texts, max_length=64, add_special_tokens=False, device=torch.device("cpu")
    )
    return GenerationRequest(ids, mask, g, budget, Sampling(), list(seeds), records)


def test_a_trajectory_masks_exactly_the_tool_tokens(tok):
    tools, engine = loop(tok, calculator_user)
    rollout = tools.generate(request(tok))
    # by hand: the call (64 characters) + </s> = 65 model tokens; the tool turn
    # `<tool_response>408</tool_response>` = 15 + 3 + 16 = 34 context tokens; `408</s>` = 4
    expected = [1] * 65 + [0] * 34 + [1] * 4
    assert rollout.model_mask[0].tolist() == expected
    assert rollout.completion_mask[0].tolist() == [1] * 103
    assert rollout.model_token_mask.sum(dim=1).tolist() == [69, 69]
    masked = rollout.completion_ids[0][rollout.model_mask[0] == 0].tolist()
    assert tok.decode(masked) == "<tool_response>408</tool_response>"
    assert rollout.entropy[0][65:99].eq(0).all() and rollout.entropy[0][:65].eq(0.5).all()
    [first, last] = rollout.trajectories[0].turns
    assert (first.num_model_tokens, first.num_context_tokens, last.num_model_tokens) == (65, 34, 4)
    assert first.calls[0].arguments == {"x": "12*34"} and first.results[0].content == "408"
    assert rollout.trajectories[0].messages() == [
        {"role": "assistant", "content": CALL, "tool_calls": [first.calls[0].as_message()]},
        {"role": "tool", "name": "calc", "content": "408"},
        {"role": "assistant", "content": "408"},
    ]
    assert not rollout.is_truncated.any() and len(engine.requests) == 2
    assert rollout.sampling_logps is None  # the inner engine gave none (as native)


def test_the_inner_engines_sampling_logps_follow_the_model_tokens_and_0_on_tool_tokens(tok):
    tools, _ = loop(tok, calculator_user, with_logps=True)
    rollout = tools.generate(request(tok, prompts=("12*34=", "2+3="), g=1, seeds=(7, 9)))
    # the scripted engine gives -(j + 1) / 10 to the j-th token of each turn: by hand,
    # turn one's 65 tokens, the 34 tool tokens at 0, turn two's 4 tokens, then padding
    first = [-(j + 1) / 10 for j in range(65)] + [0.0] * 34 + [-0.1, -0.2, -0.3, -0.4]
    assert rollout.sampling_logps is not None
    assert torch.allclose(rollout.sampling_logps[0], torch.tensor(first))
    assert torch.allclose(rollout.sampling_logps[1], torch.tensor(first))  # same replies
    # on every model token a log-prob, on every other token (tool, padding) 0
    assert torch.equal(rollout.sampling_logps.ne(0), rollout.model_token_mask.bool())


def test_each_turn_is_one_completion_per_live_trajectory_seeded_by_group_index_and_turn(tok):
    # the second prompt's trajectories answer at once, the first's call a tool first
    tools, engine = loop(tok, lambda c: "5" if c.endswith("2+3=") else calculator_user(c))
    tools.generate(request(tok, prompts=("12*34=", "2+3="), g=2, seeds=(7, 9)))
    first, second = engine.requests
    assert first.num_generations == second.num_generations == 1
    assert list(first.seeds) == [trajectory_seed(s, k, 0) for s in (7, 9) for k in (0, 1)]
    # only prompt 0's two trajectories live on; their seeds do not depend on who else lives
    assert list(second.seeds) == [trajectory_seed(7, k, 1) for k in (0, 1)]
    assert len(set(first.seeds)) == 4


def test_tool_failures_and_malformed_calls_become_tool_messages(tok):
    calls = iter(
        [
            '<tool_call>{"name": "nope"}</tool_call>',
            "<tool_call>{bad</tool_call>",
            '<tool_call>{"name": "calc", "arguments": {"x": "import os"}}</tool_call>',
            "done",
        ]
    )
    tools, _ = loop(tok, lambda c: next(calls))
    rollout = tools.generate(request(tok, g=1, budget=1000))
    results = rollout.trajectories[0].results
    assert [r.is_error for r in results] == [True, True, True]
    assert "no tool 'nope' (tools: calc)" in results[0].content
    assert "not valid JSON" in results[1].content
    assert "ValueError" in results[2].content or "SyntaxError" in results[2].content
    assert rollout.trajectories[0].turns[-1].text == "done"
    assert tool_scalars(tool_counts(rollout.trajectories)) == {
        "tools/calls_per_trajectory": 3.0,
        "tools/failure_rate": 1.0,
        "tools/iteration_limit_share": 0.0,
        "tools/invalid/calls": 2.0,  # a made-up name and bad JSON: never metric keys
        "tools/calc/calls": 1.0,
    }


def test_the_iteration_limit_ends_a_trajectory_that_keeps_calling(tok):
    tools, engine = loop(tok, lambda c: CALL, max_iterations=2)
    rollout = tools.generate(request(tok, g=1, budget=1000))
    trajectory = rollout.trajectories[0]
    assert len(trajectory.turns) == 3 and len(trajectory.results) == 2
    assert trajectory.is_at_iteration_limit and trajectory.turns[-1].results == []
    scalars = tool_scalars(tool_counts(rollout.trajectories))
    assert scalars["tools/iteration_limit_share"] == 1.0 and scalars["tools/calc/calls"] == 3.0
    assert scalars["tools/failure_rate"] == 0.0  # two answered, both right
    assert int(rollout.model_token_mask.sum()) == 3 * 65 and len(engine.requests) == 3


def test_the_token_budget_counts_model_tokens_only(tok):
    tools, engine = loop(tok, lambda c: CALL)
    rollout = tools.generate(request(tok, g=1, budget=150))
    # 65 + 65 model tokens, then 20 left: the third turn is cut there
    assert int(rollout.model_token_mask.sum()) == 150
    assert [r.max_new_tokens for r in engine.requests] == [150, 85, 20]
    assert bool(rollout.is_truncated[0]) and rollout.trajectories[0].turns[-1].calls == []
    assert int(rollout.completion_mask.sum()) == 150 + 2 * 34 + 0  # two tool turns of 34


def test_one_environment_instance_per_trajectory_reset_with_the_record(tok):
    tools, _ = loop(tok, calculator_user, tools=(EnvironmentTool(environment="calculator"),))
    records = [{"prompt": "12*34=", "answer": "408"}]
    rollout = tools.generate(request(tok, g=3, records=records))
    environments = [t.environment for t in rollout.trajectories]
    assert len({id(e) for e in environments}) == 3
    assert [(e.calls, e.problem, e.get_reward()) for e in environments] == [(1, "12*34=", 1.0)] * 3


def test_a_sandboxed_code_tool_escape_is_a_tool_error(tok):
    escape = (
        "import socket; socket.create_connection(('1.1.1.1', 80), timeout=2); "
        "print(open('/etc/shadow').read())"
    )
    program = (
        '<tool_call>{"name": "run_python", "arguments": '
        + json.dumps({"code": escape})
        + "}</tool_call>"
    )
    replies = iter([program, "gave up"])
    tools, _ = loop(tok, lambda c: next(replies), tools=(CodeTool(),))
    [result] = tools.generate(request(tok, g=1, budget=1000)).trajectories[0].results
    assert result.is_error and "exit status 1" in result.content
    assert "OSError" in result.content or "unreachable" in result.content.lower()
