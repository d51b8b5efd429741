"""`grpo plugins add FILE.py` and `grpo plugins list`: reward and tool functions from a plain
Python file in this host's plugin folder (GRPO_PLUGIN_DIRS, default `<data_dir>/plugins`;
grpo/spec/plugins.py says how names are found). Works on the local folders, not through the
API: only an operator on the host places code there."""

from __future__ import annotations

import argparse
import shutil
import sys
from importlib.metadata import entry_points
from pathlib import Path

from grpo.spec.plugins import defined_functions, folders_text, import_file, scan
from grpo.spec.rewards import ENTRY_POINT_GROUP
from grpo.spec.tools import TOOL_GROUP

GROUPS = (ENTRY_POINT_GROUP, TOOL_GROUP)
PICKED_UP = (
    "workers import plugin files when a run starts: runs started from now on can name "
    "these functions, no restart needed (a run already going keeps what it loaded); the "
    "API reads the folder at each submit. Workers on other machines need the file in their "
    "own GRPO_PLUGIN_DIRS."
)


def add_parser(parser: argparse.ArgumentParser) -> None:
    """`grpo plugins add FILE` and `grpo plugins list`."""
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser(
        "add",
        help="check that a Python file imports and defines functions, then copy it into the "
        "first GRPO_PLUGIN_DIRS folder (default <data_dir>/plugins); a file of the same name "
        "there is replaced",
    )
    add.add_argument("file", type=Path, help="the .py file")
    actions.add_parser(
        "list", help="the functions the plugin folders define, by name, with their files"
    )


def entry_point_names() -> dict[str, str]:
    """Every installed entry point name of the reward and tool groups -> its group."""
    return {ep.name: group for group in GROUPS for ep in entry_points(group=group)}


def add(file: Path, folders: list[Path]) -> int:
    """Refuse a file that does not import, defines no function, or would make a name mean
    two things; else copy it into the first folder."""
    if not folders:
        print("error: GRPO_PLUGIN_DIRS names no folder to copy the file into", file=sys.stderr)
        return 1
    if file.suffix != ".py" or file.name.startswith(("_", ".")):
        print(f"error: {file}: a plugin is a `.py` file not named `_…` or `.…`", file=sys.stderr)
        return 1
    try:
        names = defined_functions(file.read_text(encoding="utf-8"), str(file))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        print(f"error: {file}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if not names:
        print(
            f"error: {file} defines no public top-level function (`def name(...)` not "
            "starting with _): nothing a spec could name",
            file=sys.stderr,
        )
        return 1
    try:
        module = import_file(file.resolve())
    except BaseException as exc:  # noqa: BLE001 - whatever the file raises on import
        print(f"error: {file} does not import: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    target = folders[0] / file.name
    clashes = _clashes(names, target, folders)
    if clashes:
        for clash in clashes:
            print(f"error: {clash}", file=sys.stderr)
        print("rename the function(s) so that each name says which one runs", file=sys.stderr)
        return 1
    not_callable = [n for n in names if not callable(getattr(module, n, None))]
    if not_callable:
        print(f"error: {file}: not callable once imported: {', '.join(not_callable)}")
        return 1
    replaced = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(file, target)
    print(f"{'replaced' if replaced else 'added'} {target}: {', '.join(names)}")
    print(f"name them in a spec as   rewards: [{{name: python, function: {names[0]}}}]")
    print(PICKED_UP)
    return 0


def _clashes(names: list[str], target: Path, folders: list[Path]) -> list[str]:
    """Each name the new file would share with another plugin file or an entry point."""
    found = scan(folders).functions
    installed = entry_point_names()
    clashes = []
    for name in names:
        others = [p for p in found.get(name, ()) if p != target]
        if others:
            clashes.append(f"{name!r} is already defined in {others[0]}")
        if name in installed:
            clashes.append(f"{name!r} is an installed entry point of group {installed[name]!r}")
    return clashes


def list_plugins(folders: list[Path]) -> int:
    """Each function name and its file; names defined twice and files that do not parse
    are listed as problems (exit 1)."""
    found = scan(folders)
    installed = entry_point_names()
    print(f"plugin folders: {folders_text(folders)}")
    problems = 0
    for name, files in sorted(found.functions.items()):
        print(f"{name}  {files[0]}")
        if len(files) > 1:
            problems += 1
            print(f"  problem: also defined in {', '.join(map(str, files[1:]))}: refused")
        if name in installed:
            problems += 1
            print(f"  problem: also an entry point of group {installed[name]!r}: refused")
    for path, why in found.broken.items():
        problems += 1
        print(f"problem: {path} does not parse: {why}")
    if not found.functions and not found.broken:
        print("no plugin functions (`grpo plugins add FILE.py` adds a file)")
    return 1 if problems else 0


def plugins(args: argparse.Namespace, folders: list[Path]) -> int:
    if args.action == "add":
        return add(args.file, folders)
    return list_plugins(folders)
