"""A callable described to the model as chat templates take tools: transformers'
`get_json_schema` reads the type hints and the docstring's `Args:` section into
{"type": "function", "function": {name, description, parameters}}. transformers is
imported inside the function: the API checks tool entries without loading it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def function_schema(function: Callable[..., Any], *, name: str | None = None) -> dict[str, Any]:
    """The tool schema of `function` (a bound method drops `self`), renamed to `name`;
    ValueError saying what is missing (a type hint, a parameter's description)."""
    from transformers.utils.chat_template_utils import get_json_schema

    try:
        schema = get_json_schema(function)
    except Exception as exc:  # transformers raises its own DocstringParsingException
        raise ValueError(
            f"cannot describe {getattr(function, '__name__', function)!r} to the model: {exc} "
            "(tools need type hints and a docstring with an Args: line per parameter)"
        ) from exc
    if name is not None:
        schema["function"]["name"] = name
    return schema
