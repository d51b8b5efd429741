"""Every tool kind, found by the `name` of an entry (the discriminator of
grpo/spec/tools.py's ToolSpec union): one line per kind (grpo/tools/kind.py says what a
kind is). Imports without torch: the API checks entries with it, the worker prepares them.
"""

from __future__ import annotations

from typing import Any

from grpo.spec.tools import ToolSpec
from grpo.tools.code import CODE_TOOL
from grpo.tools.environment import ENVIRONMENT_TOOL
from grpo.tools.http import HTTP_TOOL
from grpo.tools.kind import ToolKind
from grpo.tools.python import PYTHON_TOOL

TOOL_KINDS: dict[str, ToolKind[Any]] = {
    kind.name: kind for kind in (PYTHON_TOOL, CODE_TOOL, HTTP_TOOL, ENVIRONMENT_TOOL)
}


def tool_kind_of(entry: ToolSpec) -> ToolKind[Any]:
    """The kind of a tool entry (every entry of a valid spec has one)."""
    return TOOL_KINDS[entry.name]
