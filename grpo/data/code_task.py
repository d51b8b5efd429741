"""`builtin:code`: small function-writing problems with call tests, for the `code` reward.

Each record's `tests` field holds `{"call", "expected"}` objects: the call runs after the
completion's program in the sandbox (see grpo/rewards/sandbox.py) and its value is compared
with the expected one outside it (grpo/rewards/code.py); the reward is the fraction equal.
The `answer` is one correct solution, kept for reading, never shown to the policy. Knows
nothing of models.
"""

from __future__ import annotations

from grpo.data.example import Example

_PROBLEMS: tuple[tuple[str, str, str, tuple[tuple[str, object], ...]], ...] = (
    # (id, prompt, reference solution, (call, expected value) tests)
    (
        "add",
        "Write a Python function add(a, b) that returns the sum of a and b.",
        "def add(a, b):\n    return a + b",
        (("add(1, 2)", 3), ("add(-4, 4)", 0), ("add(10, 5)", 15)),
    ),
    (
        "square",
        "Write a Python function square(x) that returns x squared.",
        "def square(x):\n    return x * x",
        (("square(3)", 9), ("square(-2)", 4), ("square(0)", 0)),
    ),
    (
        "is_even",
        "Write a Python function is_even(n) that returns True when n is even.",
        "def is_even(n):\n    return n % 2 == 0",
        (("is_even(4)", True), ("is_even(7)", False), ("is_even(0)", True)),
    ),
    (
        "maximum",
        "Write a Python function maximum(xs) that returns the largest number of a list.",
        "def maximum(xs):\n    return max(xs)",
        (("maximum([1, 5, 3])", 5), ("maximum([-2, -9])", -2)),
    ),
    (
        "reverse",
        "Write a Python function reverse(s) that returns the string s reversed.",
        "def reverse(s):\n    return s[::-1]",
        (("reverse('abc')", "cba"), ("reverse('')", "")),
    ),
    (
        "count_vowels",
        "Write a Python function count_vowels(s) that counts the vowels (aeiou) in s.",
        "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())",
        (("count_vowels('hello')", 2), ("count_vowels('xyz')", 0)),
    ),
    (
        "factorial",
        "Write a Python function factorial(n) that returns n! for n >= 0.",
        "def factorial(n):\n    return 1 if n < 2 else n * factorial(n - 1)",
        (("factorial(0)", 1), ("factorial(5)", 120)),
    ),
    (
        "fizz",
        "Write a Python function fizz(n) that returns 'fizz' when n is divisible by 3, "
        "else str(n).",
        "def fizz(n):\n    return 'fizz' if n % 3 == 0 else str(n)",
        (("fizz(9)", "fizz"), ("fizz(4)", "4")),
    ),
)


def code_examples(split: str) -> list[Example]:
    """Every problem, in both splits (the task is for trying the code reward, not for eval)."""
    if split not in ("train", "test"):
        raise ValueError(f"builtin:code has splits 'train' and 'test', not {split!r}")
    return [
        Example(
            id=pid,
            prompt=prompt,
            answer=solution,
            data={"tests": [{"call": call, "expected": value} for call, value in tests]},
        )
        for pid, prompt, solution, tests in _PROBLEMS
    ]
