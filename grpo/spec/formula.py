"""The formula of a `multi` reward entry (OpenAI's multi grader): an arithmetic expression
over the labels of the spec's other reward entries, such as `min(format, accuracy)` or
`format * accuracy`.

It is parsed by Python's `ast` and allowed only numbers, names, `+ - * /`, unary `-`,
`min`, `max`, `abs` and parentheses; whatever else it holds is refused naming the offending
piece. Nothing is ever evaluated as Python: grpo/rewards/multi.py walks the checked tree.
Pure Python, no pydantic or torch. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import ast

MAX_FORMULA_CHARS = 500
FUNCTIONS = {"min": (2, None), "max": (2, None), "abs": (1, 1)}
"""The functions a formula may call: (the fewest, the most arguments; None: any)."""
OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
}  # fmt: skip
ALLOWED = "numbers, reward labels, + - * /, unary -, min(), max(), abs() and parentheses"
REFUSED_OPERATORS: dict[type[ast.AST], str] = {
    ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//", ast.MatMult: "@", ast.LShift: "<<",
    ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&", ast.UAdd: "unary +",
    ast.Not: "not", ast.Invert: "~",
}  # fmt: skip


class FormulaError(ValueError):
    """Why a formula is refused, naming what in it is not allowed."""


def parse_formula(formula: str) -> ast.expr:
    """The formula's checked tree; FormulaError naming the first piece not allowed."""
    try:
        tree = ast.parse(formula.strip(), mode="eval")
    except SyntaxError as exc:
        at = f" at column {exc.offset}" if exc.offset else ""
        raise FormulaError(f"not a formula: {exc.msg}{at}") from None
    except (MemoryError, RecursionError):
        raise FormulaError("not a formula: nested too deeply") from None
    except ValueError as exc:  # a null byte
        raise FormulaError(f"not a formula: {exc}") from None
    for node in ast.walk(tree.body):
        check_node(node, formula)
    return tree.body


def check_node(node: ast.AST, formula: str) -> None:
    match node:
        case ast.Constant(value=value):
            if isinstance(value, bool) or not isinstance(value, int | float):
                refuse(piece(node, formula))
        case ast.Name() | ast.Load():
            return
        case ast.BinOp(op=op) if type(op) in OPERATORS:
            return
        case ast.UnaryOp(op=ast.USub()):
            return
        case ast.BinOp(op=op) | ast.UnaryOp(op=op):
            refuse(REFUSED_OPERATORS.get(type(op), piece(node, formula)))
        case ast.Call(func=ast.Name(id=name), args=args, keywords=keywords) if name in FUNCTIONS:
            check_call(name, args, keywords, node, formula)
        case ast.Call(func=func):
            refuse(piece(func, formula))
        case ast.operator() | ast.unaryop():
            return  # judged with the node that holds it
        case _:
            refuse(piece(node, formula))


def check_call(
    name: str, args: list[ast.expr], keywords: list[ast.keyword], node: ast.AST, formula: str
) -> None:
    if keywords or any(isinstance(a, ast.Starred) for a in args):
        refuse(piece(node, formula))
    fewest, most = FUNCTIONS[name]
    if len(args) < fewest or (most is not None and len(args) > most):
        count = "one argument" if most == 1 else f"at least {fewest} arguments"
        raise FormulaError(f"`{piece(node, formula)}`: {name}() takes {count}")


def refuse(what: str) -> None:
    raise FormulaError(f"`{what}` is not allowed: a formula has {ALLOWED}")


def piece(node: ast.AST, formula: str) -> str:
    """The node's text in the formula, cut at 40 characters."""
    text = ast.get_source_segment(formula.strip(), node) or type(node).__name__
    return text if len(text) <= 40 else f"{text[:39]}…"


def formula_names(tree: ast.expr) -> list[str]:
    """The labels a checked formula reads, in order, once each (not the functions it calls)."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called]
    names.sort(key=lambda n: (n.lineno, n.col_offset))
    return list(dict.fromkeys(n.id for n in names))
