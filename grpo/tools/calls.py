"""Tool calls in an assistant turn, in the Hermes / Qwen2.5 convention the chat templates
of those models render: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any
number per turn. A call that cannot be read (bad JSON, no name, arguments not an object,
an unclosed tag) is kept with its error: the loop answers it with a tool message saying
so, and the trajectory goes on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(re.escape(OPEN) + r"(.*?)(?:" + re.escape(CLOSE) + r"|$)", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One call as written: the tool's name, its arguments, or why it could not be read."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    text: str = ""
    """The call's JSON text as the model wrote it."""

    def as_message(self) -> dict[str, Any]:
        """The call as a chat message's `tool_calls` entry (transformers' format)."""
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every `<tool_call>` of an assistant turn, in order (an unclosed last one too)."""
    calls = []
    for match in _CALL.finditer(text):
        body = match.group(1).strip()
        closed = match.group(0).endswith(CLOSE)
        calls.append(_read_call(body) if closed else ToolCall("", error=_UNCLOSED, text=body))
    return calls


_UNCLOSED = f"the tool call is not closed with {CLOSE}"


def _read_call(body: str) -> ToolCall:
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall("", error=f"the tool call is not valid JSON: {exc.msg}", text=body)
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return ToolCall("", error='a tool call is {"name": ..., "arguments": {...}}', text=body)
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    if not isinstance(arguments, dict):
        return ToolCall(value["name"], error="`arguments` must be a JSON object", text=body)
    return ToolCall(value["name"], arguments, text=body)
