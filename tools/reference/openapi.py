"""The REST API reference: every operation of the OpenAPI document (`app.main`'s
`app.openapi()`) with its parameters, request body and responses, and the response schemas;
the JobSpec and its sections link to their own page."""

from __future__ import annotations

from app.main import create_app
from grpo.spec import JobSpec
from tools.reference.markdown import (
    GENERATED,
    Link,
    Schema,
    code,
    constraint_text,
    default_text,
    first_line,
    table,
    type_text,
)

METHODS = ("get", "post", "put", "patch", "delete")
INTRO = """\
The document itself is served at `/openapi.json` and browsable at `/docs` on a running
server. Errors always have the shape `{"error": {"code", "message", "fields"?}}`; a bad
spec is a 422 whose `fields` name each field (`{"loc": "epsilon_high", "message": ...}`)."""


def page() -> str:
    document = create_app().openapi()
    spec_schemas = {"JobSpec", *JobSpec.model_json_schema().get("$defs", {})}
    link = linker(spec_schemas, document["components"]["schemas"])
    parts = ["# REST API", GENERATED.format(what="the OpenAPI document of `app.main`"), INTRO]
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                parts.append(operation(method, path, item[method], link))
    parts.append("## Schemas {#schemas}")
    parts.append("The JobSpec and its sections: [JobSpec reference](jobspec.md).")
    for name, schema in document["components"]["schemas"].items():
        if name not in spec_schemas and "properties" in schema:
            parts.append(component(name, schema, link))
    return "\n\n".join(parts) + "\n"


def linker(spec_schemas: set[str], components: dict[str, Schema]) -> Link:
    def link(name: str) -> str:
        if name == "JobSpec":
            return "[JobSpec](jobspec.md)"
        if name in spec_schemas:
            return f"[{name}](jobspec.md)"
        if "properties" not in components.get(name, {}):  # an enum or alias: said inline
            return type_text(components.get(name, {}), link)
        return f"[{name}](#schema-{name.lower()})"

    return link


def operation(method: str, path: str, op: Schema, link: Link) -> str:
    parts = [f"## `{method.upper()} {path}`", f"**{op.get('summary', '')}**"]
    if op.get("description"):
        parts.append(op["description"])
    params = op.get("parameters", [])
    if params:
        parts.append(table(("Parameter", "In", "Type", "Default", "Description"), [
            (code(p["name"]) + (" (required)" if p.get("required") else ""), p["in"],
             type_text(p.get("schema", {}), link) + constraint_note(p.get("schema", {})),
             default_text(p.get("schema", {}), required=False), p.get("description", ""))
            for p in params
        ]))  # fmt: skip
    body = op.get("requestBody")
    if body:
        kinds = ", ".join(f"{code(k)}: {schema_text(v, link)}" for k, v in body["content"].items())
        parts.append(f"Request body{' (required)' if body.get('required') else ''}: {kinds}")
    rows = []
    for status, response in op.get("responses", {}).items():
        content = response.get("content", {})
        media = ", ".join(f"{code(k)}: {schema_text(v, link)}" for k, v in content.items())
        rows.append((code(status), first_line(response.get("description")), media))
    parts.append(table(("Status", "Meaning", "Content"), rows))
    return "\n\n".join(parts)


def schema_text(media: Schema, link: Link) -> str:
    schema = media.get("schema")
    return type_text(schema, link) if schema else "-"


def constraint_note(schema: Schema) -> str:
    text = constraint_text(schema)
    return f" ({text})" if text else ""


def component(name: str, schema: Schema, link: Link) -> str:
    required = set(schema.get("required", []))
    rows = [
        (code(field), type_text(prop, link), "yes" if field in required else "",
         str(prop.get("description", "")))
        for field, prop in schema["properties"].items()
    ]  # fmt: skip
    title = f"### `{name}` {{#schema-{name.lower()}}}"
    intro = first_line(schema.get("description"))
    return "\n\n".join(
        p for p in (title, intro, table(("Field", "Type", "Required", "Description"), rows)) if p
    )
