"""The dashboard's TypeScript declarations are the API's OpenAPI schemas, written as TS."""

from __future__ import annotations

from tools.jstypes import current, declarations, ts_type


def test_the_api_enums_and_bodies_are_declared() -> None:
    text = current()
    statuses = '"queued" | "running" | "succeeded" | "failed" | "cancelled"'
    assert f"export type RunStatus = {statuses};" in text
    assert "export type RunOut = {\n  id: string;" in text and "  status: RunStatus;" in text
    assert "bin_edges: { [key: string]: number[] };" in text


def test_nullable_enum_and_array_schemas_become_unions() -> None:
    assert ts_type({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string | null"
    assert ts_type({"type": "string", "enum": ["a", "b"]}) == '"a" | "b"'
    assert ts_type({"type": "array", "items": {"type": "integer"}}) == "number[]"
    nullable_items = {"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "null"}]}}
    assert ts_type(nullable_items) == "(number | null)[]"
    assert ts_type({"$ref": "#/components/schemas/JobSpec-Input"}) == "JobSpec_Input"


def test_objects_mark_optional_fields_and_type_their_extra_keys() -> None:
    schema = {
        "type": "object",
        "properties": {
            "step": {"type": "integer"},
            "note": {"type": "string", "description": "Why."},
        },
        "required": ["step"],
    }
    assert ts_type(schema) == "{\n  step: number;\n  /** Why. */\n  note?: string;\n}"
    assert ts_type({"type": "object", "additionalProperties": {"type": "number"}}) == (
        "{ [key: string]: number }"
    )
    assert ts_type({"type": "object", "additionalProperties": True}) == "{ [key: string]: any }"


def test_every_component_schema_is_exported_by_name() -> None:
    doc = {"components": {"schemas": {"B": {"type": "boolean"}, "A": {"const": 1}}}}
    text = declarations(doc)
    assert text.index("export type A = 1;") < text.index("export type B = boolean;")
