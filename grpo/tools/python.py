"""`python` tools: functions that packages installed on the worker register under the
entry-point group `grpo.tools`, or that files in a plugin folder define (GRPO_PLUGIN_DIRS,
grpo/spec/plugins.py), sync or async, described from signature and docstring.

Only installed entry points and files an operator placed in a plugin folder are loadable: a
spec names a function, never a module or a path.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from grpo.spec.plugins import load_function, locate, refusal_text
from grpo.spec.tools import TOOL_GROUP, PythonTool
from grpo.tools.describe import function_schema
from grpo.tools.kind import Prepared, Refusal, Tool, ToolKind, ToolRunFacts, ToolServerFacts


def installed(group: str) -> list[str]:
    """Names of the entry points of `group` in this environment."""
    return sorted({ep.name for ep in entry_points(group=group)})


def not_installed(group: str, name: str, *, field: str, what: str) -> Refusal | None:
    """A refusal naming `field` when no entry point `name` is installed in `group`."""
    found = installed(group)
    if name in found:
        return None
    return Refusal(
        field,
        f"no {what} {name!r} is installed in entry-point group {group!r} "
        f"(installed: {', '.join(found) or 'none'})",
    )


def load_entry_point(group: str, name: str) -> Any:
    """The object registered as `name` in `group`; ValueError naming the installed ones."""
    found = entry_points(group=group, name=name)
    if not found:
        names = ", ".join(installed(group)) or "none"
        raise ValueError(
            f"no {name!r} is installed in entry-point group {group!r} (installed: {names})"
        )
    return next(iter(found)).load()


def call_sync(function: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    """function(**arguments); a coroutine function runs to completion in its own loop (the
    loop's worker threads have none)."""
    if inspect.iscoroutinefunction(function):
        return asyncio.run(function(**arguments))
    return function(**arguments)


def check_installed(entry: PythonTool, server: ToolServerFacts) -> Refusal | None:
    """The function must be available here too: the API and the workers share packages and
    plugin folders."""
    why = refusal_text(
        entry.function,
        what="tool",
        group=TOOL_GROUP,
        installed=installed(TOOL_GROUP),
        folders=server.plugin_dirs,
    )
    return None if why is None else Refusal("function", why)


def prepare_function(entry: PythonTool, run: ToolRunFacts) -> Prepared:
    found = installed(TOOL_GROUP)
    path = locate(
        entry.function, what="tool", group=TOOL_GROUP, installed=found, folders=run.plugin_dirs
    )
    function: Any
    if path is not None:
        function = load_function(path, entry.function)
    else:
        function = load_entry_point(TOOL_GROUP, entry.function)
    if not callable(function):
        raise ValueError(f"entry point {entry.function!r} of group {TOOL_GROUP!r} is not callable")
    schema = function_schema(function, name=entry.label)
    return Prepared(
        [Tool(entry.label, schema, lambda arguments, env: call_sync(function, arguments))]
    )


PYTHON_TOOL = ToolKind("python", check_installed, prepare_function)
