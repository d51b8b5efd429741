"""The one rule for YAML that a user hands us: a spec file (`grpo train`, `grpo submit`,
`grpo.train`), a TRL recipe (`grpo convert`, `POST /api/specs/convert`), a `--set` value.

A spec or a GRPOConfig is a flat tree of scalars: nothing in one needs YAML's anchors and
aliases, and aliases are how a few hundred bytes become gigabytes ("billion laughs": ten
aliases of ten aliases of ... a string, each level x10). So anchors and aliases are refused
where they are parsed, before anything is built, as are trees nested deeper than
`MAX_DEPTH` and documents longer than `MAX_CHARS`. The loader is PyYAML's safe one
otherwise (no Python tags). Every refusal is a `YamlRefused` (a ValueError) that names the
line, so the API answers 422 and the CLI prints one line.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 64
"""Nesting levels a document may have (a spec needs 4; tool parameters a few more)."""

MAX_CHARS = 1_000_000
"""Characters a document may have (the largest recipe we know is ~4 KB)."""


class YamlRefused(ValueError):
    """The text is not YAML we accept; the message names the line."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses anchors, aliases and deep nesting while composing."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            kind = "alias *" if isinstance(event, yaml.AliasEvent) else "anchor &"
            raise YamlRefused(
                f"line {event.start_mark.line + 1}: YAML {kind}{anchor} is not accepted "
                "(anchors and aliases can expand a small file without bound): write the value out"
            )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise YamlRefused(
                    f"line {event.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels"
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml(text: str, *, source: str = "YAML") -> Any:
    """The document in `text`, or YamlRefused naming `source` and the line."""
    if len(text) > MAX_CHARS:
        raise YamlRefused(f"{source}: {len(text):,} characters, more than {MAX_CHARS:,}")
    loader = None
    try:
        loader = _Loader(text)  # its reader refuses control characters here
        return loader.get_single_data()
    except YamlRefused as exc:
        raise YamlRefused(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        raise YamlRefused(f"{source}: not YAML: {exc}"[:500]) from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer past Python's digit limit
        raise YamlRefused(f"{source}: {exc}"[:500]) from None
    finally:
        if loader is not None:
            loader.dispose()
