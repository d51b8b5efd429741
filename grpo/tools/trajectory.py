"""A multi-turn trajectory as the tool loop built it: its turns (the assistant's text, the
calls it made, the results it got), what rewards receive of it (TRL's conversational
completion: a list of messages), and what is stored of it for the group inspector.
Plain Python: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grpo.tools.calls import ToolCall


@dataclass(frozen=True)
class ToolResult:
    """A call's answer: the text the model reads, whether it is an error, how long it took."""

    name: str
    content: str
    is_error: bool = False
    seconds: float = 0.0


@dataclass
class Turn:
    """One assistant turn and the tool turn that answered it (none for the last)."""

    text: str
    """The assistant's text (its tokens, decoded without special tokens)."""
    num_model_tokens: int
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    context_text: str = ""
    """The tool turn's text as it entered the context (chat template applied); masked."""
    num_context_tokens: int = 0


@dataclass
class Trajectory:
    """A completion made of turns; `environment`: its own environment instance, if any."""

    turns: list[Turn] = field(default_factory=list)
    reset_text: str = ""
    """What the environment's reset() showed before the first turn (masked context)."""
    num_reset_tokens: int = 0
    environment: Any = None
    is_at_iteration_limit: bool = False
    """It still called tools when max_tool_calling_iterations was reached."""

    @property
    def calls(self) -> list[ToolCall]:
        return [c for t in self.turns for c in t.calls]

    @property
    def results(self) -> list[ToolResult]:
        return [r for t in self.turns for r in t.results]

    def messages(self) -> list[dict[str, Any]]:
        """TRL's conversational completion: assistant messages (with `tool_calls`) and the
        `tool` messages that answered them."""
        messages: list[dict[str, Any]] = []
        if self.reset_text:
            messages.append({"role": "user", "content": self.reset_text})
        for turn in self.turns:
            message: dict[str, Any] = {"role": "assistant", "content": turn.text}
            if turn.calls:
                message["tool_calls"] = [c.as_message() for c in turn.calls]
            messages.append(message)
            messages += [
                {"role": "tool", "name": r.name, "content": r.content} for r in turn.results
            ]
        return messages

    def record(self) -> dict[str, Any]:
        """What is stored of the trajectory (JSON): every turn with its calls, results and
        token counts, so the inspector shows it and a replay can check each result."""
        return {
            "reset": self.reset_text,
            "num_reset_tokens": self.num_reset_tokens,
            "is_at_iteration_limit": self.is_at_iteration_limit,
            "turns": [
                {
                    "text": t.text,
                    "num_model_tokens": t.num_model_tokens,
                    "num_context_tokens": t.num_context_tokens,
                    "context": t.context_text,
                    "calls": [
                        {"name": c.name, "arguments": c.arguments, "error": c.error}
                        for c in t.calls
                    ],
                    "results": [
                        {"name": r.name, "content": r.content, "is_error": r.is_error}
                        for r in t.results
                    ],
                }
                for t in self.turns
            ],
        }
