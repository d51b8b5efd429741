"""The JobSpec reference: every field, nested sections and reward kinds included, with its
type, default, constraint and docstring, read from `JobSpec.model_json_schema()`."""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from pydantic import BaseModel

from grpo.spec import JobSpec
from tools.reference.markdown import (
    GENERATED,
    Link,
    Schema,
    anchor,
    code,
    constraint_text,
    default_text,
    first_line,
    ref_name,
    table,
    type_text,
)

HEADER = ("Field", "Type", "Default", "Constraint", "Description")


@dataclass(frozen=True)
class Section:
    path: str
    """Dotted path of the object in a spec (`data`, `rewards[http]`)."""
    definition: str
    """Its name in the schema's $defs."""


def page() -> str:
    schema = JobSpec.model_json_schema()
    defs: dict[str, Schema] = schema.get("$defs", {})
    sections = find_sections(schema["properties"], defs)
    link = linker(sections, defs)
    parts = [
        "# JobSpec",
        GENERATED.format(what="`JobSpec.model_json_schema()`, `grpo/spec/`"),
        first_line(schema.get("description")),
        "The body of `POST /api/runs` and the YAML of `grpo train` and `grpo submit`. Unknown "
        "keys are refused (422 naming the field). Knob names follow TRL's `GRPOConfig` where "
        "the concept is the same. A field's dotted path is its place in the spec: "
        '`data.source` is `{"data": {"source": ...}}`; `rewards[http].url` is the `url` '
        "of a `rewards` entry whose `name` is `http`.",
        *examples(schema),
    ]
    for title, doc, names in top_level_groups(JobSpec):
        parts += [f"## {title} {{#knobs-{title.lower()}}}", first_line(doc)]
        parts.append(fields_table("", schema, names, sections, link))
    introduced: set[str] = set()
    for section in sections:
        base = section.path.split("[")[0]
        if "[" in section.path and base not in introduced:
            introduced.add(base)
            parts += union_intro(base, [s for s in sections if s.path.startswith(base + "[")])
        node = defs[section.definition]
        level = "###" if "[" in section.path else "##"
        parts += [
            f"{level} `{section.path}` {{#{anchor(section.path)}}}",
            first_line(node.get("description")),
        ]
        parts.append(fields_table(section.path, node, list(node["properties"]), sections, link))
    return "\n\n".join(p for p in parts if p) + "\n"


def examples(schema: Schema) -> list[str]:
    shown = [
        f"```yaml\n{yaml.safe_dump(e, sort_keys=False).rstrip()}\n```"
        for e in schema.get("examples", [])
    ]
    return ["Examples:", *shown] if shown else []


def top_level_groups(spec: type[BaseModel]) -> list[tuple[str, str, list[str]]]:
    """JobSpec's own fields grouped by the knob class that declares them, in field order."""
    seen: set[str] = set()
    groups = []
    for cls in reversed(spec.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        names = [n for n in cls.model_fields if n not in seen]
        seen.update(names)
        if names:
            title = "Job" if cls is spec else cls.__name__.removesuffix("Knobs")
            groups.append((title, cls.__doc__ or "", names))
    return groups


def union_intro(base: str, kinds: list[Section]) -> list[str]:
    links = ", ".join(f"[`{s.path}`](#{anchor(s.path)})" for s in kinds)
    return [
        f"## `{base}` entries {{#{anchor(base)}}}",
        f"Each entry of `{base}` is one of these kinds, chosen by its `name`: {links}.",
    ]


def fields_table(
    prefix: str, node: Schema, names: list[str], sections: list[Section], link: Link
) -> str:
    required = set(node.get("required", []))
    known = {s.path for s in sections}
    rows = []
    for name in names:
        prop = node["properties"][name]
        path = f"{prefix}.{name}" if prefix else name
        is_section = path in known or any(k.startswith(path + "[") for k in known)
        first = code(path) if is_section else f'<a id="{anchor(path)}"></a>{code(path)}'
        rows.append((
            first,
            type_text(prop, link),
            default_text(prop, required=name in required),
            constraint_text(prop),
            str(prop.get("description", "")),
        ))  # fmt: skip
    return table(HEADER, rows, raw=1)


def find_sections(properties: dict[str, Schema], defs: dict[str, Schema]) -> list[Section]:
    """Every object a spec nests, breadth first, each $def once at the first path it takes."""
    sections: list[Section] = []
    taken: set[str] = set()
    queue = [("", properties)]
    while queue:
        prefix, props = queue.pop(0)
        for name, prop in props.items():
            path = f"{prefix}.{name}" if prefix else name
            for kind, definition in nested_objects(prop, defs):
                if definition in taken:
                    continue
                taken.add(definition)
                section = Section(f"{path}[{kind}]" if kind else path, definition)
                sections.append(section)
                queue.append((section.path, defs[definition]["properties"]))
    return sections


def nested_objects(node: Schema, defs: dict[str, Schema]) -> list[tuple[str | None, str]]:
    """(kind, $def name) of the objects a property holds; kind names a union's member."""
    name = ref_name(node)
    if name is not None:
        return [(None, name)] if "properties" in defs.get(name, {}) else []
    mapping = node.get("discriminator", {}).get("mapping")
    if mapping:  # in the union's own order
        kinds = {str(ref).rsplit("/", 1)[-1]: kind for kind, ref in mapping.items()}
        members = [ref_name(each) for each in node.get("oneOf", [])]
        return [(kinds[m], m) for m in members if m in kinds]
    found: list[tuple[str | None, str]] = []
    for key in ("anyOf", "oneOf", "prefixItems"):
        for each in node.get(key, []):
            found += nested_objects(each, defs)
    if isinstance(node.get("items"), dict):
        found += nested_objects(node["items"], defs)
    if len(found) > 1:  # an undiscriminated union: its members by name
        found = [(kind or definition, definition) for kind, definition in found]
    return found


def linker(sections: list[Section], defs: dict[str, Schema]) -> Link:
    where = {section.definition: section.path for section in sections}

    def link(name: str) -> str:
        if name in where:
            return f"[{name}](#{anchor(where[name])})"
        if name in defs and "properties" not in defs[name]:
            return type_text(defs[name], link)
        return code(name)

    return link
