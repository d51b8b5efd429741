"""Plugin folders: plain Python files an operator placed on the hosts (GRPO_PLUGIN_DIRS,
default `<data dir>/plugins`), whose top-level functions `python` rewards and tools name
as they name installed entry points.

A function's name is its own: `def my_reward(...)` in `<folder>/my_rewards.py` is `my_reward`
(what `grpo.train(reward_funcs=[my_reward])` calls it too). Public top-level `def` and
`async def` statements of the folder's `*.py` files count (not `_private` ones, not names
imported or assigned, not files whose name starts with `_` or `.`, not subfolders). Names are
read from the source without running it (the API's submit check); the worker imports the
file when a run starts, afresh each run, so a file added or changed is used from the next
run on. A name defined in two files, or both in a file and as an entry point of the group
asked for, is an error naming both places, never a silent pick. Messages an API client may
read name files, never the server's folders. Standard library only.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REWARD_PLUGIN_EXAMPLE = "examples/reward-plugin"
ADD_COMMAND = "grpo plugins add FILE.py"
_MODULE_NAME = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class Found:
    """What the plugin folders define: each function name with the files defining it, and
    the files that could not be read or parsed, with why."""

    functions: dict[str, tuple[Path, ...]] = field(default_factory=dict)
    broken: dict[Path, str] = field(default_factory=dict)


def plugin_files(folders: Sequence[Path]) -> list[Path]:
    """The `*.py` files directly in `folders` (missing folders have none), in order."""
    files: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            files += sorted(
                p for p in folder.glob("*.py") if p.is_file() and not p.name.startswith(("_", "."))
            )
    return files


def defined_functions(source: str, filename: str = "<plugin>") -> list[str]:
    """Names of the public top-level `def`/`async def` of `source`; SyntaxError if it does
    not parse."""
    tree = ast.parse(source, filename=filename)
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
    ]


def scan(folders: Sequence[Path]) -> Found:
    """Every function the folders' files define, read from their source (nothing runs)."""
    found = Found()
    for path in plugin_files(folders):
        try:
            names = defined_functions(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
            found.broken[path] = f"{type(exc).__name__}: {exc}"
            continue
        for name in dict.fromkeys(names):
            found.functions[name] = (*found.functions.get(name, ()), path)
    return found


def folders_text(folders: Sequence[Path]) -> str:
    return ", ".join(str(f) for f in folders) or "none"


def unknown_message(
    name: str, *, what: str, group: str, installed: Collection[str], folders: Sequence[Path]
) -> str:
    """The refusal of a name neither installed nor in a plugin folder, saying both ways to
    make one available."""
    in_files = sorted(scan(folders).functions)
    return (
        f"no {what} {name!r} is installed in entry-point group {group!r} or defined in a "
        f"plugin folder (installed: {', '.join(sorted(installed)) or 'none'}; in the "
        f"GRPO_PLUGIN_DIRS folders: {', '.join(in_files) or 'none'}). "
        f"Make it available either way: pip-install a package that registers it in "
        f"entry-point group {group!r} (as {REWARD_PLUGIN_EXAMPLE} does), or put a Python "
        f"file defining `def {name}(...)` in a GRPO_PLUGIN_DIRS folder (`{ADD_COMMAND}` "
        "copies one there)"
    )


def locate(
    name: str, *, what: str, group: str, installed: Collection[str], folders: Sequence[Path]
) -> Path | None:
    """The plugin file defining `name`, or None when an entry point of `group` is it;
    ValueError when neither has it, or when it is defined twice (two files, or a file and
    an entry point)."""
    files = scan(folders).functions.get(name, ())
    if files and name in installed:
        raise ValueError(
            f"{what} {name!r} is both an entry point of group {group!r} and defined in "
            f"plugin file {files[0].name}: rename the function or uninstall the package, so "
            "that the name says which one runs"
        )
    if len(files) > 1:
        raise ValueError(
            f"{what} {name!r} is defined in more than one plugin file "
            f"({', '.join(p.name for p in files)}): rename one, so that the name says which "
            "one runs"
        )
    if files:
        return files[0]
    if name in installed:
        return None
    raise ValueError(
        unknown_message(name, what=what, group=group, installed=installed, folders=folders)
    )


def refusal_text(
    name: str, *, what: str, group: str, installed: Collection[str], folders: Sequence[Path]
) -> str | None:
    """Why a spec may not name `name` here (unknown or ambiguous), or None."""
    try:
        locate(name, what=what, group=group, installed=installed, folders=folders)
    except ValueError as exc:
        return str(exc)
    return None


def import_file(path: Path) -> Any:
    """Run the file as a fresh module (registered as `grpo_plugin_<stem>`, a top-level name
    with no parent package, replacing one an earlier load imported) and return it; its
    errors propagate."""
    module_name = f"grpo_plugin_{_MODULE_NAME.sub('_', path.stem)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def load_function(path: Path, name: str) -> Callable[..., Any]:
    """The function `name` of the plugin file `path`, imported now."""
    module = import_file(path)
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"{path} defines no callable {name!r} once imported")
    return function  # type: ignore[no-any-return]
