"""No function in grpo/ over MAX_LINES lines or MAX_PARAMS parameters, unless ALLOWED says why.

A function's lines run from its `def` to its last line, less its docstring; its parameters
are the positional, keyword-only, *args and **kwargs ones, without self or cls. Nested
functions and methods count on their own (`module:Class.method`, `module:outer.inner`).
Knobs that travel together go in a small frozen dataclass (LossKnobs, AdvantageKnobs,
EngineContext); a long function splits into named steps. ALLOWED only shrinks: an entry
that no longer exceeds, or names nothing, fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 60
MAX_PARAMS = 8

ALLOWED: dict[str, str] = {}
""""module:qualname" -> why it remains over the limits (none does today)."""


class Size(NamedTuple):
    lines: int
    params: int


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def _size(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Size:
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    lines = (node.end_lineno or node.lineno) - node.lineno + 1 - _docstring_lines(node)
    return Size(lines, len([n for n in names if n not in ("self", "cls")]))


def function_sizes(source: str) -> dict[str, Size]:
    """Every function of `source` by qualified name, nested ones and methods included."""
    sizes: dict[str, Size] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                sizes[prefix + child.name] = _size(child)
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return sizes


def _too_big(size: Size) -> bool:
    return size.lines > MAX_LINES or size.params > MAX_PARAMS


def grpo_sizes() -> dict[str, Size]:
    sizes: dict[str, Size] = {}
    for path in sorted((ROOT / "grpo").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for name, size in function_sizes(path.read_text()).items():
            sizes[f"{module}:{name}"] = size
    return sizes


def test_the_measure_counts_lines_less_the_docstring_and_params_less_self() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES - 2))
    source = (
        "class C:\n"
        "    def m(self, a, b, /, c, *args, d, e, f, g, **kw):\n"
        '        """A docstring\n\n        over three lines."""\n'
        "        def inner(x):\n"
        "            return x\n"
        "        return inner\n"
        "def long():\n"
        '    """Doc."""\n'
        f"{body}"
        "    return 0\n"
        "def longer():\n"
        f"{body}"
        "    y = 1\n"
        "    return y\n"
    )
    sizes = function_sizes(source)
    assert sizes == {
        "C.m": Size(4, 9),
        "C.m.inner": Size(2, 1),
        "long": Size(MAX_LINES, 0),
        "longer": Size(MAX_LINES + 1, 0),
    }
    assert [n for n, s in sizes.items() if _too_big(s)] == ["C.m", "longer"]


class Problems(NamedTuple):
    over: dict[str, Size]
    """Over the limits and not allowed."""
    gone: list[str]
    """Allowed, but no such function."""
    stale: dict[str, Size]
    """Allowed, but within the limits now."""


def problems(sizes: dict[str, Size], allowed: dict[str, str]) -> Problems:
    return Problems(
        {n: s for n, s in sizes.items() if _too_big(s) and n not in allowed},
        [n for n in allowed if n not in sizes],
        {n: sizes[n] for n in allowed if n in sizes and not _too_big(sizes[n])},
    )


def test_the_allowlist_fails_new_offenders_and_entries_gone_or_stale() -> None:
    sizes = {"m:big": Size(61, 0), "m:wide": Size(3, 9), "m:fine": Size(60, 8)}
    allowed = {"m:wide": "why", "m:fine": "was big", "m:gone": "was here"}
    assert problems(sizes, allowed) == Problems(
        {"m:big": Size(61, 0)}, ["m:gone"], {"m:fine": Size(60, 8)}
    )
    assert problems(sizes, {"m:big": "why", "m:wide": "why"}) == Problems({}, [], {})


def test_no_function_in_grpo_over_the_limits_unless_allowed() -> None:
    over = problems(grpo_sizes(), ALLOWED).over
    assert not over, (
        f"over {MAX_LINES} lines or {MAX_PARAMS} parameters (group knobs in a frozen "
        f"dataclass, split into named steps, or say why in ALLOWED): {over}"
    )


def test_every_allowed_function_exists_and_still_exceeds() -> None:
    _, gone, stale = problems(grpo_sizes(), ALLOWED)
    assert not gone, f"ALLOWED names functions that no longer exist: {gone}"
    assert not stale, f"within the limits now, drop them from ALLOWED: {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())
