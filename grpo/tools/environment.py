"""Environments: a class a package registers in entry-point group `grpo.environments`, one
instance per trajectory (TRL's `environment_factory`). `reset(**record)` starts an episode
(its text, if any, is shown to the model before its first turn); every public method with
a docstring but reset and get_reward is a tool, described from its signature and
docstring, and called on the trajectory's own instance; `get_reward()`, when present, is
for reward functions, which receive the instances as `environments`.
"""

from __future__ import annotations

import inspect
from typing import Any

from grpo.spec.tools import ENVIRONMENT_GROUP, EnvironmentTool
from grpo.tools.describe import function_schema
from grpo.tools.kind import Prepared, Refusal, Tool, ToolKind, ToolRunFacts, ToolServerFacts
from grpo.tools.python import call_sync, load_entry_point, not_installed

NOT_TOOLS = ("reset", "get_reward")


def tool_methods(instance: Any) -> list[str]:
    """Public methods with a docstring, reset and get_reward left out, in name order."""
    return sorted(
        name
        for name, member in inspect.getmembers(instance, callable)
        if not name.startswith("_") and name not in NOT_TOOLS and inspect.getdoc(member)
    )


def method_caller(name: str) -> Any:
    def call(arguments: dict[str, Any], environment: Any) -> Any:
        if environment is None:
            raise RuntimeError(f"tool {name!r} needs the trajectory's environment")
        return call_sync(getattr(environment, name), arguments)

    return call


def check_installed(entry: EnvironmentTool, server: ToolServerFacts) -> Refusal | None:
    return not_installed(
        ENVIRONMENT_GROUP, entry.environment, field="environment", what="environment"
    )


def prepare_environment(entry: EnvironmentTool, run: ToolRunFacts) -> Prepared:
    """Load the class, make one instance to read its tools, fail early when it has none."""
    factory = load_entry_point(ENVIRONMENT_GROUP, entry.environment)
    probe = factory()
    if not callable(getattr(probe, "reset", None)):
        raise ValueError(f"environment {entry.environment!r} has no reset() method")
    names = tool_methods(probe)
    if not names:
        raise ValueError(f"environment {entry.environment!r} has no documented public method")
    tools = [Tool(n, function_schema(getattr(probe, n)), method_caller(n)) for n in names]
    return Prepared(tools, environment=factory)


ENVIRONMENT_TOOL = ToolKind("environment", check_installed, prepare_environment)
