"""The OpenAPI document's schemas as TypeScript declarations, for the dashboard's JSDoc.

`python -m tools.jstypes` writes app/static/js/openapi.d.ts (not committed: `make lint`
writes it from the code it checks, just before tsc), so a field renamed in a response model
is a type error in the JavaScript that reads it. Knows nothing of the routes beyond their
schemas; nothing served reads the file. A lint-time tool: app/ never imports tools/, and
tools/ is not part of the installed package.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from app.main import create_app

TARGET = Path(__file__).parents[1] / "app" / "static" / "js" / "openapi.d.ts"
HEADER = (
    "// Written from the OpenAPI document by `python -m tools.jstypes` (make lint); not edited.\n"
    "// The dashboard's JSDoc imports these: /** @typedef {import('./openapi').RunOut} RunOut */\n"
)
PRIMITIVES = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean"}


def ts_type(schema: dict[str, Any], indent: str = "") -> str:
    """One JSON Schema as a TypeScript type expression."""
    if "$ref" in schema:
        return type_name(str(schema["$ref"]).rsplit("/", 1)[-1])
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    alternatives = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
    if alternatives:
        joiner = " & " if "allOf" in schema else " | "
        return joiner.join(ts_type(alt, indent) for alt in alternatives)
    kind = schema.get("type")
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(ts_type(item, indent) for item in schema["prefixItems"]) + "]"
        item = ts_type(schema.get("items", {}), indent)
        return f"({item})[]" if " " in item else f"{item}[]"
    if kind == "object" or "properties" in schema:
        return object_type(schema, indent)
    if kind == "null":
        return "null"
    return PRIMITIVES.get(str(kind), "unknown")


def object_type(schema: dict[str, Any], indent: str) -> str:
    """Properties as `{ name: T }` (optional unless required), extra keys as an index type."""
    extra = schema.get("additionalProperties")
    index = "" if extra in (None, False) else ("any" if extra is True else ts_type(extra, indent))
    properties: dict[str, Any] = schema.get("properties", {})
    if not properties:
        return f"{{ [key: string]: {index} }}" if index else "{ [key: string]: unknown }"
    required = set(schema.get("required", []))
    inner = indent + "  "
    lines = ["{"]
    for name, prop in properties.items():
        if prop.get("description"):
            lines.append(f"{inner}{doc_comment(prop['description'], inner)}")
        mark = "" if name in required else "?"
        lines.append(f"{inner}{name}{mark}: {ts_type(prop, inner)};")
    if index:
        lines.append(f"{inner}[key: string]: unknown;")
    lines.append(indent + "}")
    return "\n".join(lines)


def type_name(schema_name: str) -> str:
    """`JobSpec-Input` (FastAPI's split input/output schemas) as `JobSpec_Input`."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in schema_name)


def doc_comment(text: str, indent: str) -> str:
    lines = text.strip().splitlines()
    if len(lines) == 1:
        return f"/** {lines[0]} */"
    body = "".join(f"\n{indent} * {line}".rstrip() for line in lines)
    return f"/**{body}\n{indent} */"


def declarations(openapi: dict[str, Any]) -> str:
    """Every component schema as `export type Name = ...;`, in name order."""
    schemas: dict[str, Any] = openapi.get("components", {}).get("schemas", {})
    parts = [HEADER]
    for name in sorted(schemas):
        schema = schemas[name]
        if schema.get("description"):
            parts.append(doc_comment(schema["description"], ""))
        parts.append(f"export type {type_name(name)} = {ts_type(schema)};\n")
    return "\n".join(parts)


def current() -> str:
    return declarations(create_app().openapi())


if __name__ == "__main__":
    TARGET.write_text(current())
    sys.stdout.write(f"wrote {TARGET}\n")
