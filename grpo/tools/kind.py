"""What a tool kind is: one object per `name` of a tool entry (the discriminator of
grpo/spec/tools.py's ToolSpec union) that owns everything about that kind, as reward kinds
do (grpo/rewards/kind.py):

    check(entry, server) -> Refusal | None   at submit, in the API's process: a host this
                                             server does not allow, a plugin it lacks
    prepare(entry, run) -> Prepared          once per run, on the worker: the tools the
                                             entry offers (schema and how to call), and
                                             the environment class when it is one

A prepared tool is called as `tool.call(arguments, environment)` with the parsed JSON
arguments and the trajectory's environment instance (None without one); what it returns,
as text, is the tool result; what it raises is the error the model reads. Imports without
torch: the API runs `check`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from grpo.rewards.kind import Refusal

E = TypeVar("E")
__all__ = ["Prepared", "Refusal", "Tool", "ToolKind", "ToolRunFacts", "ToolServerFacts"]


@dataclass(frozen=True)
class Tool:
    """One tool as the model sees it (`schema`, the chat template's `tools` entry) and
    how the loop calls it."""

    name: str
    schema: dict[str, Any]
    """{"type": "function", "function": {"name", "description", "parameters"}}."""
    call: Callable[[dict[str, Any], Any], Any]
    """(arguments, environment instance or None) -> result (str, or anything str() shows)."""


@dataclass(frozen=True)
class Prepared:
    """What preparing an entry gives: its tools, and the environment class for one."""

    tools: list[Tool] = field(default_factory=list)
    environment: Callable[[], Any] | None = None


@dataclass(frozen=True)
class ToolServerFacts:
    """What a submit-time check may know: the endpoint hosts tools may use
    (GRPO_TOOL_HOSTS, else GRPO_REWARD_HOSTS), the token variables the operator lists and
    the plugin folders (GRPO_PLUGIN_DIRS)."""

    tool_hosts: tuple[str, ...] = ()
    token_envs: tuple[str, ...] = ()
    plugin_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ToolRunFacts:
    """What preparing an entry on the worker may use (the same allow-lists)."""

    run_id: str = ""
    tool_hosts: tuple[str, ...] = ()
    token_envs: tuple[str, ...] = ()
    plugin_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ToolKind(Generic[E]):
    """One kind of tool entry: its discriminator `name`, its check and its preparation."""

    name: str
    check: Callable[[E, ToolServerFacts], Refusal | None]
    prepare: Callable[[E, ToolRunFacts], Prepared]
