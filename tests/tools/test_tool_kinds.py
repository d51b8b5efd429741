"""Tool entries and kinds: pydantic's rules, one kind object per entry name, python tools
described from signature and docstring (sync or async), environments' tools from their
documented public methods."""

from __future__ import annotations

import asyncio
import typing

import pytest
from pydantic import ValidationError

from grpo.spec import JobSpec
from grpo.spec.tools import ToolSpec
from grpo.tools.environment import ENVIRONMENT_TOOL
from grpo.tools.kind import ToolRunFacts
from grpo.tools.python import PYTHON_TOOL, call_sync
from grpo.tools.registry import TOOL_KINDS


def test_every_tool_entry_name_has_its_kind():
    union = typing.get_args(typing.get_args(ToolSpec)[0])
    names = {entry.model_fields["name"].default for entry in union}
    assert names == set(TOOL_KINDS) == {"python", "code", "http", "environment"}


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([{"name": "python", "function": "calc"}] * 2, "labels must be unique"),
        ([{"name": "http", "url": "http://h/", "description": "d"}], "needs a `label`"),
        ([{"name": "environment", "environment": "a"}] * 2, "at most one environment"),
        ([{"name": "code", "label": "run code"}], "identifier"),
        (
            [
                {
                    "name": "http",
                    "label": "s",
                    "url": "http://h/",
                    "description": "d",
                    "token_env": "GRPO_API_TOKENS",
                }
            ],
            "may not be used",
        ),  # fmt: skip
    ],
)
def test_bad_entries_are_refused_by_the_spec(tools, message):
    with pytest.raises(ValidationError, match=message):
        JobSpec(tools=tools)


def test_a_python_tool_is_described_from_its_signature_and_docstring():
    prepared = PYTHON_TOOL.prepare(
        JobSpec(tools=[{"name": "python", "function": "calc"}]).tools[0], ToolRunFacts()
    )
    [tool] = prepared.tools
    function = tool.schema["function"]
    assert function["name"] == "calc" and function["description"].startswith("Evaluate")
    assert function["parameters"]["properties"]["x"]["type"] == "string"
    assert tool.call({"x": "6*7"}, None) == "42"


def test_async_functions_run_to_completion():
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    assert call_sync(double, {"n": 21}) == 42


def test_an_environment_offers_its_documented_methods_on_the_trajectorys_instance():
    entry = JobSpec(tools=[{"name": "environment", "environment": "calculator"}]).tools[0]
    prepared = ENVIRONMENT_TOOL.prepare(entry, ToolRunFacts())
    assert [t.name for t in prepared.tools] == ["calc"]  # reset and get_reward are not tools
    environment = prepared.environment()
    assert prepared.tools[0].call({"x": "2*3"}, environment) == "6" and environment.calls == 1
    with pytest.raises(RuntimeError, match="needs the trajectory's environment"):
        prepared.tools[0].call({"x": "2*3"}, None)
