"""A held-out share of a training source: `eval.holdout_fraction` keeps a seeded share of
the training file's examples out of training and evaluates on them.

An uploaded dataset or a local file has one split, so without `eval.source` an eval would
score the prompts the run trains on. The split is a seeded permutation of the examples'
positions (the run's `seed`): the trainer and the evaluation compute the same one, the two
parts never share an example, and every example is in one of them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def holdout_split(
    examples: Sequence[T], fraction: float | None, *, seed: int
) -> tuple[list[T], list[T]]:
    """(training examples, held-out examples): round(n x fraction) of the n examples, at
    least 1 and at most n - 1, drawn by a permutation seeded with `seed`, each part in the
    file's order. `fraction` None: all examples train, none is held out."""
    if fraction is None:
        return list(examples), []
    n = len(examples)
    if n < 2:
        raise ValueError(
            f"eval.holdout_fraction needs at least 2 examples to split, and the data has {n}"
        )
    held_count = min(n - 1, max(1, round(n * fraction)))
    order = list(range(n))
    random.Random(f"grpo-holdout:{seed}").shuffle(order)
    held = set(order[:held_count])
    return (
        [e for i, e in enumerate(examples) if i not in held],
        [e for i, e in enumerate(examples) if i in held],
    )
