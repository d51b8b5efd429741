"""`code` tools: the model hands a Python program (argument `code`) to the code reward's
bubblewrap sandbox (grpo/rewards/sandbox.py); the result is its stdout, its stderr and a
note when a limit was hit. An escape attempt meets the sandbox: no network, no host files,
CPU, memory, process and output limits; whatever happens is the tool's answer, never a
failed step.
"""

from __future__ import annotations

from typing import Any

from grpo.rewards.sandbox import bubblewrap, check_sandbox, run_sandboxed
from grpo.spec.tools import CodeTool
from grpo.tools.kind import Prepared, Refusal, Tool, ToolKind, ToolRunFacts, ToolServerFacts


class SandboxToolError(RuntimeError):
    """The program failed or hit a limit; the message is what the model reads."""


def code_schema(entry: CodeTool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": entry.label,
            "description": "Run a Python program in a sandbox and return what it prints.",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The program."}},
                "required": ["code"],
            },
        },
    }


def run_program(entry: CodeTool, arguments: dict[str, Any]) -> str:
    """stdout (+ stderr); SandboxToolError when the program fails or hits a limit."""
    code = arguments.get("code")
    if not isinstance(code, str):
        raise ValueError("argument `code` must be a string holding a Python program")
    result = run_sandboxed(code, stdin="", timeout_s=entry.timeout_s, memory_mb=entry.memory_mb)
    text = result.stdout + (f"\n{result.stderr}" if result.stderr else "")
    if result.note or result.returncode != 0:
        raise SandboxToolError(
            f"{result.note or f'exit status {result.returncode}'}: {text.strip()}"
        )
    return text


def check_bubblewrap(entry: CodeTool, server: ToolServerFacts) -> Refusal | None:
    if bubblewrap() is not None:
        return None
    return Refusal("", "code tools run in a bubblewrap sandbox, which this server lacks")


def prepare_sandbox(entry: CodeTool, run: ToolRunFacts) -> Prepared:
    """Start the sandbox once before step 1, so a worker that cannot run it says so."""
    check_sandbox()
    return Prepared([Tool(entry.label, code_schema(entry), lambda a, env: run_program(entry, a))])


CODE_TOOL = ToolKind("code", check_bubblewrap, prepare_sandbox)
