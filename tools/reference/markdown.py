"""Markdown pieces the reference pages share: table cells and JSON Schema nodes in words."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

Schema = dict[str, Any]
Link = Callable[[str], str]
"""Writes a named schema ($ref) as a link or a name."""
GENERATED = "Generated from the code when the site is built ({what}); do not edit."

BOUNDS = (
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "length ≥ {}"),
    ("maxLength", "length ≤ {}"),
    ("minItems", "items ≥ {}"),
    ("maxItems", "items ≤ {}"),
    ("multipleOf", "multiple of {}"),
)


def cell(text: str) -> str:
    """Prose fit for one table cell: one line, no raw HTML, pipes escaped (code spans too:
    Python-Markdown splits table rows on an unescaped pipe inside them)."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = parts[i].replace("<", "&lt;")
    return "`".join(parts).replace("|", "\\|")


def code(value: str) -> str:
    """An inline code span that survives a value with backticks in it."""
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, raw: int = 0) -> str:
    """A markdown table; the first `raw` columns are written as given (anchors, links)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [c if i < raw else cell(c) for i, c in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def anchor(path: str) -> str:
    """The HTML id of a dotted path: `rewards[http].url` -> `rewards.http.url`."""
    return path.replace("[", ".").replace("]", "")


def first_line(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def literal(value: Any) -> str:
    return code(json.dumps(value, ensure_ascii=False))


def ref_name(node: Schema) -> str | None:
    ref = node.get("$ref")
    if ref is None and len(node.get("allOf", [])) == 1:
        ref = node["allOf"][0].get("$ref")
    return None if ref is None else str(ref).rsplit("/", 1)[-1]


def type_text(node: Schema, link: Link) -> str:
    """A schema's type in words; `link` writes a named schema ($ref) as a link or a name."""
    name = ref_name(node)
    if name is not None:
        return link(name)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " | ".join(type_text(each, link) for each in node[key])
    if "const" in node:
        return literal(node["const"])
    if "enum" in node:
        return " | ".join(literal(v) for v in node["enum"])
    kind = node.get("type")
    if kind == "array":
        if "prefixItems" in node:
            return "[" + ", ".join(type_text(n, link) for n in node["prefixItems"]) + "]"
        return "list of " + type_text(node.get("items", {}), link)
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return "map of " + type_text(node["additionalProperties"], link)
    if isinstance(kind, list):
        return " | ".join(code(k) for k in kind)
    return code(str(kind or "any"))


def constraint_text(node: Schema) -> str:
    """Bounds, lengths and patterns of a schema node and of its non-null alternatives."""
    found = [fmt.format(node[key]) for key, fmt in BOUNDS if key in node]
    if "pattern" in node:
        found.append("matches " + code(str(node["pattern"])))
    for key in ("anyOf", "oneOf"):
        found += [c for n in node.get(key, []) if (c := constraint_text(n))]
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        if inner := constraint_text(node["items"]):
            found.append(f"each: {inner}")
    return "; ".join(found)


def default_text(node: Schema, *, required: bool) -> str:
    if "default" in node:
        return literal(node["default"])
    return "required" if required else ""
