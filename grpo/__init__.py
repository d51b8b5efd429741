"""GRPO: `from grpo import train, Trainer, submit` (grpo/python_api.py). Nothing is imported
until one of them is used, so `import grpo` and `grpo.spec` never load torch."""

from __future__ import annotations

from typing import Any

_LAZY = {"train": "grpo.python_api", "Trainer": "grpo.python_api", "submit": "grpo.python_api"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'grpo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(_LAZY)
