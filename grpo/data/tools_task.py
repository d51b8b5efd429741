"""`builtin:tools`: two-digit multiplication with a calculator (`42*34=` -> `1428`).

The built-in tiny model cannot multiply, but it can call `calc` and copy the answer (every
product has four digits, so the answer sits at one fixed distance after the tool result,
which a model this small learns to copy quickly):
`<tool_call>{"name":"calc","arguments":{"x":"12*34"}}</tool_call>`, then the tool turn
`<tool_response>408</tool_response>`, then `408`. The calculator is offered both ways a
spec can name it: the `python` tool `calc` (entry point in group `grpo.tools`) and the
environment `calculator` (group `grpo.environments`, one instance per trajectory, which
also counts its calls for a reward's `environments`). One seeded order of every problem,
cut into a test and a train split. Knows nothing of models.
"""

from __future__ import annotations

import ast
import json
import operator
import random
from typing import Any

from grpo.data.example import Example

TOOLS_SEED = 20261201
TOOLS_TEST_SIZE = 400
CALC_SCHEMA = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "Evaluate an arithmetic expression of integers with +, - and *.",
        "parameters": {
            "type": "object",
            "properties": {
                "x": {"type": "string", "description": 'The expression, for example "12*34".'}
            },
            "required": ["x"],
        },
    },
}
"""`calc` as chat templates take tools (what grpo/tools/describe.py reads from it)."""
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def calc(x: str) -> str:
    """Evaluate an arithmetic expression of integers with +, - and *.

    Args:
        x: The expression, for example "12*34".
    """
    tree = ast.parse(x.strip(), mode="eval")
    return str(_evaluate(tree.body))


def _evaluate(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 10**6:
        return int(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return int(_OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    raise ValueError("calc takes integers (below a million) joined by +, - and *")


class CalculatorEnvironment:
    """The calculator as an environment: one per trajectory, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.problem = ""

    def reset(self, **record: Any) -> str | None:
        """Start an episode on `record` (its prompt and answer); shows nothing."""
        self.calls, self.problem = 0, str(record.get("prompt", ""))
        return None

    def calc(self, x: str) -> str:
        """Evaluate an arithmetic expression of integers with +, - and *.

        Args:
            x: The expression, for example "12*34".
        """
        self.calls += 1
        return calc(x)

    def get_reward(self) -> float:
        """1 when the calculator was used at least once in the episode."""
        return float(self.calls > 0)


def final_answer(
    prompts: list[Any], completions: list[Any], answer: list[str], **kwargs: Any
) -> list[float]:
    """Reward (`python` reward `final_answer`): 1 when the trajectory's last assistant
    message is exactly the answer. A tool trajectory's completion is TRL's list of messages,
    so a tool result that holds the answer earns nothing until the model writes it."""
    return [
        float(_last_assistant(c).strip() == a) for c, a in zip(completions, answer, strict=True)
    ]


def used_tool(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """Reward (`python` reward `used_tool`): the environment's get_reward() when the spec has
    one (`environments`), else 1 when any tool call was answered (`tool_results`)."""
    if "environments" in kwargs:
        return [float(e.get_reward()) for e in kwargs["environments"]]
    return [float(bool(results)) for results in kwargs.get("tool_results", [[]] * len(completions))]


def _last_assistant(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    contents = [m.get("content", "") for m in completion if m.get("role") == "assistant"]
    return str(contents[-1]) if contents else ""


def tool_call_text(problem: str) -> str:
    """The call the warmed-up model learns to write for `problem` (`12*34`)."""
    call = {"name": "calc", "arguments": {"x": problem}}
    return f"<tool_call>{json.dumps(call, separators=(',', ':'))}</tool_call>"


def tools_examples(split: str) -> list[Example]:
    """`ab*cd=` with operands 32..99 (every product has four digits); test is the first
    TOOLS_TEST_SIZE of one seeded order, train the rest."""
    problems = [(a, b) for a in range(32, 100) for b in range(32, 100)]
    random.Random(TOOLS_SEED).shuffle(problems)
    match split:
        case "test":
            chosen = problems[:TOOLS_TEST_SIZE]
        case "train":
            chosen = problems[TOOLS_TEST_SIZE:]
        case _:
            raise ValueError(f"builtin:tools has splits 'train' and 'test', not {split!r}")
    return [Example(id=f"{a}*{b}", prompt=f"{a}*{b}=", answer=str(a * b)) for a, b in chosen]
