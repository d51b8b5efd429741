"""The `multi` reward kind: a formula over the scores the spec's other entries gave each
completion (OpenAI's multi grader), such as `min(format, accuracy)`.

The formula was checked at submit (grpo/spec/formula.py: numbers, labels, `+ - * /`, unary
`-`, min, max, abs); here its tree is walked, never evaluated as Python. The Rewarder scores
every other entry first and hands their scores in `batch.scores` (grpo/rewards/scoring.py).
A completion gets null where a label the formula reads is null for it (that function does
not apply), or where the formula divides by zero or overflows, with a note saying which.
Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping

from grpo.rewards.batch import Notes, RewardBatch
from grpo.rewards.kind import RewardKind, RunFacts, Scorer, no_server_check
from grpo.spec.formula import formula_names, parse_formula
from grpo.spec.rewards import MultiReward

BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}
CALLS: dict[str, Callable[..., float]] = {"min": min, "max": max, "abs": abs}


def prepare(entry: MultiReward, run: RunFacts) -> Scorer:
    tree = parse_formula(entry.formula)
    names = formula_names(tree)

    def scorer(batch: RewardBatch, notes: Notes) -> list[float | None]:
        scores: list[float | None] = []
        for i in range(len(batch.completions)):
            values = {name: batch.scores[name][i] for name in names}
            missing = [name for name, value in values.items() if value is None]
            if missing:
                scores.append(None)  # a function it reads does not apply: nor does it
                continue
            score = formula_value(tree, values)  # type: ignore[arg-type]
            if score is None:
                notes[i] = f"{entry.formula} divides by zero or overflows here: null"
            scores.append(score)
        return scores

    return scorer


def formula_value(tree: ast.expr, values: Mapping[str, float]) -> float | None:
    """The formula's value for one completion's scores; None where it is not a number."""
    try:
        value = walk(tree, values)
    except (ZeroDivisionError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def walk(node: ast.expr, values: Mapping[str, float]) -> float:
    match node:
        case ast.Constant(value=int() | float() as number):  # the check let only these by
            return float(number)
        case ast.Name(id=name):
            return float(values[name])
        case ast.UnaryOp(operand=operand):  # only unary minus passes the check
            return -walk(operand, values)
        case ast.BinOp(left=left, op=op, right=right):
            return BINARY[type(op)](walk(left, values), walk(right, values))
        case ast.Call(func=ast.Name(id=name), args=args):
            return float(CALLS[name](*(walk(arg, values) for arg in args)))
    raise ValueError(f"not a checked formula: {ast.dump(node)[:80]}")


MULTI = RewardKind[MultiReward](name="multi", check=no_server_check, prepare=prepare)
