"""Final-answer extraction and comparison for the accuracy reward, bounded in time.

Completions are untrusted text. Extraction is linear-time string scanning; symbolic
comparison parses only a whitelisted arithmetic alphabet with sympy (never Python `eval`
of arbitrary text), rejects huge literals and exponents before any evaluation, and runs
under a wall-clock timeout so one hostile completion scores 0 instead of hanging a worker.
Knows nothing of models, specs or tensors.
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction
from typing import Any

MAX_ANSWER_CHARS = 200
"""Longer extracted answers are not compared (they score 0)."""
SYMPY_TIMEOUT_S = 1.0
"""Wall-clock budget of one symbolic comparison."""

_NUMBER = re.compile(r"(?<![\d.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,3})?(?:/\d+)?")
_SAFE_EXPR = re.compile(r"[0-9A-Za-z+\-*/^().,\s]*")
_NAMES = frozenset(
    {
        "x",
        "y",
        "z",
        "n",
        "k",
        "a",
        "b",
        "c",
        "t",
        "pi",
        "E",
        "I",
        "sqrt",
        "sin",
        "cos",
        "tan",
        "log",
        "exp",
        "oo",
    }
)
_LATEX = (
    ("\\left", ""),
    ("\\right", ""),
    ("\\cdot", "*"),
    ("\\times", "*"),
    ("\\div", "/"),
    ("\\pi", "pi"),
    ("\\infty", "oo"),
    ("\\!", ""),
    ("\\,", ""),
    ("{", "("),
    ("}", ")"),
    ("$", ""),
)
_FRAC = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")
_SQRT = re.compile(r"\\sqrt\{([^{}]*)\}")


def extract_answer(text: str, how: str = "auto") -> str | None:
    """The final answer: `<answer>...</answer>`, then `\\boxed{...}`, then the last number."""
    order = ("answer_tag", "boxed", "last_number") if how == "auto" else (how,)
    for kind in order:
        found = {"answer_tag": _answer_tag, "boxed": _boxed, "last_number": last_number}[kind](text)
        if found is not None:
            return found.strip()
    return None


def _answer_tag(text: str) -> str | None:
    end = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, end if end >= 0 else None)
    if start < 0:
        return None
    # an unclosed last tag (truncated completion) still counts: the answer is what follows it
    return text[start + len("<answer>") : end] if end > start else text[start + len("<answer>") :]


def _boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None


def last_number(text: str) -> str | None:
    """The last integer, decimal or fraction in the text (thousands commas allowed)."""
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def parse_number(text: str) -> Fraction | None:
    """Exact value of a plain number like `-1,234.5`, `3/4` or `$12`, else None."""
    cleaned = text.strip().rstrip(".").replace(",", "").replace("$", "").replace(" ", "")
    # a strict shape: Fraction("1e999999999") would build a billion-digit integer
    if len(cleaned) > 64 or not _PLAIN_NUMBER.fullmatch(cleaned):
        return None
    try:
        return Fraction(cleaned)
    except (ValueError, ZeroDivisionError):
        return None


def is_equal(predicted: str | None, reference: str, *, compare: str, tolerance: float) -> bool:
    """Whether the extracted answer matches the reference: numeric, symbolic or string."""
    if predicted is None or len(predicted) > MAX_ANSWER_CHARS:
        return False
    match compare:
        case "string":
            return _normalize(predicted) == _normalize(reference)
        case "numeric":
            return _numbers_equal(predicted, reference, tolerance=tolerance)
        case "symbolic":
            if _numbers_equal(predicted, reference, tolerance=tolerance):
                return True
            return _run_with_timeout(_symbolic_equal, predicted, reference)
        case _:
            raise ValueError(f"compare must be numeric, symbolic or string, got {compare!r}")


def _normalize(text: str) -> str:
    return " ".join(text.strip().rstrip(".").split()).lower()


def _numbers_equal(predicted: str, reference: str, *, tolerance: float) -> bool:
    want = parse_number(reference)
    got = parse_number(predicted)
    if got is None:
        inner = last_number(predicted)
        got = parse_number(inner) if inner is not None else None
    if want is None or got is None:
        return want is None and got is None and _normalize(predicted) == _normalize(reference)
    return abs(float(got - want)) <= tolerance


def _run_with_timeout(func: Any, *args: str) -> bool:
    """Run func in a daemon thread; a timeout scores False (the thread is left to finish)."""
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(bool(func(*args))), daemon=True)
    worker.start()
    worker.join(SYMPY_TIMEOUT_S)
    return bool(result and result[0])


def _symbolic_equal(predicted: str, reference: str) -> bool:
    try:
        left, right = _to_sympy(predicted), _to_sympy(reference)
        if left is None or right is None:
            return False
        import sympy

        return bool(sympy.simplify(left - right) == 0)
    except Exception:  # noqa: BLE001 - any failure of a hostile expression scores 0
        return False


def _to_sympy(text: str) -> Any:
    """Parse a whitelisted arithmetic expression; None when unsafe or unparsable."""
    expr = _SQRT.sub(r"sqrt(\1)", _FRAC.sub(r"((\1)/(\2))", text))
    for latex, plain in _LATEX:
        expr = expr.replace(latex, plain)
    if len(expr) > MAX_ANSWER_CHARS or not _SAFE_EXPR.fullmatch(expr) or "__" in expr:
        return None
    if any(name not in _NAMES for name in re.findall(r"[A-Za-z]+", expr)):
        return None
    import sympy
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    names = {
        name: getattr(sympy, name)
        for name in ("sqrt", "sin", "cos", "tan", "log", "exp", "pi", "E", "I", "oo")
    }
    transforms = (*standard_transformations, implicit_multiplication_application, convert_xor)
    parsed = parse_expr(expr, local_dict=names, transformations=transforms, evaluate=False)
    return parsed if _is_small(parsed) else None


MAX_DIGITS = 10_000
"""Bound on the digits of any number an accepted expression can evaluate to."""


def _is_small(expr: Any) -> bool:
    """Reject expressions whose evaluation alone would take unbounded time or memory: big
    int powers hold the GIL, so a timeout could not stop them."""
    import sympy

    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Integer) and abs(int(node)) > 10**30:
            return False
        if isinstance(node, sympy.Pow) and node.exp.has(sympy.Pow):
            return False
    return _digits_bound(expr) <= MAX_DIGITS


def _digits_bound(node: Any) -> float:
    """Upper bound on the decimal digits of a numeric value: digits multiply under powers
    and add under products and sums."""
    import sympy

    if isinstance(node, sympy.Integer):
        return float(len(str(abs(int(node)))))
    if isinstance(node, sympy.Pow) and node.exp.is_Number:
        return _digits_bound(node.base) * max(1.0, abs(float(node.exp)))
    return sum((_digits_bound(arg) for arg in node.args), 1.0)
