"""`builtin:arith`: two-digit addition and subtraction, the built-in task (`23+45=` -> `68`).

One seeded order of every problem, cut into a test and a train split, so the split never
moves. Knows nothing of models.
"""

from __future__ import annotations

import random

from grpo.data.example import Example

ARITH_SEED = 20240101
ARITH_MAX_OPERAND = 49
"""Operands are 0..49, written with two digits (`07+35=`); operators are + and - with
a >= b, so answers are plain non-negative integers. Aligned digit positions are what let
the 300k-parameter built-in model learn carries in seconds (unpadded operands, or 0..99,
left it on a 10% plateau for 1,000 steps in some seeds)."""
ARITH_OPERATORS = ("+", "-")
ARITH_TEST_SIZE = 400


def arith_problems() -> list[tuple[int, str, int]]:
    """Every (a, op, b) problem of the task, in one seeded order (train and test cut it)."""
    problems = [
        (a, op, b)
        for op in ARITH_OPERATORS
        for a in range(ARITH_MAX_OPERAND + 1)
        for b in range(ARITH_MAX_OPERAND + 1)
        if op == "+" or a >= b
    ]
    random.Random(ARITH_SEED).shuffle(problems)
    return problems


def arith_examples(split: str) -> list[Example]:
    """The built-in task: `23+45=` → `68`, `07-03=` → `4`. Test is the first
    ARITH_TEST_SIZE problems of the seeded order, train the rest."""
    problems = arith_problems()
    match split:
        case "test":
            chosen = problems[:ARITH_TEST_SIZE]
        case "train":
            chosen = problems[ARITH_TEST_SIZE:]
        case _:
            raise ValueError(f"builtin:arith has splits 'train' and 'test', not {split!r}")
    examples = []
    for a, op, b in chosen:
        answer = a + b if op == "+" else a - b
        problem = f"{a:02d}{op}{b:02d}"
        examples.append(Example(id=problem, prompt=f"{problem}=", answer=str(answer)))
    return examples
