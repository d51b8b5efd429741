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

from app.settings import Settings
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


def folder_origin(settings: Settings) -> str:
    """Which setting chose the plugin folders: this command writes where the service reads
    only when it runs with the service's GRPO_DATA_DIR (or GRPO_PLUGIN_DIRS)."""
    if settings.plugin_dirs is not None:
        return "GRPO_PLUGIN_DIRS"
    if "data_dir" in settings.model_fields_set:
        return f"GRPO_DATA_DIR/plugins, GRPO_DATA_DIR={settings.data_dir}"
    return (
        "./data/plugins of this directory: GRPO_DATA_DIR and GRPO_PLUGIN_DIRS are unset, "
        "as for a `make up` or `grpo up` started here"
    )


def unused_folder_warning(settings: Settings) -> str | None:
    """A warning when the folder is in a data directory that holds no service's data (it is
    missing, or holds nothing but plugins): `grpo plugins add` run from another directory
    than `make up`, or without the GRPO_DATA_DIR the service was started with, writes where
    no service reads. Asked before the file is copied."""
    if settings.plugin_dirs is not None:
        return None
    data_dir = settings.data_dir.resolve()
    if data_dir.is_dir() and any(child.name != "plugins" for child in data_dir.iterdir()):
        return None
    return (
        f"warning: {data_dir} holds no service's data (no database, runs or datasets): a "
        "service started elsewhere, or with another GRPO_DATA_DIR or GRPO_PLUGIN_DIRS, reads "
        "another plugin folder; run `grpo plugins add` where `make up` ran, or with the "
        "GRPO_DATA_DIR or GRPO_PLUGIN_DIRS the service was started with"
    )


def add(file: Path, folders: list[Path], settings: Settings | None = None) -> int:
    """Refuse a file that does not import, defines no function, or would make a name mean
    two things; else copy it into the first folder, saying which setting chose it."""
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
    warning = None if settings is None else unused_folder_warning(settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(file, target)
    print(f"{'replaced' if replaced else 'added'} {target}: {', '.join(names)}")
    if settings is not None:
        print(f"the plugin folder: {folder_origin(settings)}")
    print(f"name them in a spec as   rewards: [{{name: python, function: {names[0]}}}]")
    print(PICKED_UP)
    if warning:
        print(warning, file=sys.stderr)
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


def list_plugins(folders: list[Path], settings: Settings | None = None) -> int:
    """Each function name and its file; names defined twice and files that do not parse
    are listed as problems (exit 1)."""
    found = scan(folders)
    installed = entry_point_names()
    origin = "" if settings is None else f" ({folder_origin(settings)})"
    print(f"plugin folders: {folders_text(folders)}{origin}")
    warning = None if settings is None else unused_folder_warning(settings)
    if warning:
        print(warning, file=sys.stderr)
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


def plugins(args: argparse.Namespace, settings: Settings) -> int:
    folders = settings.plugin_dir_list
    if args.action == "add":
        return add(args.file, folders, settings)
    return list_plugins(folders, settings)
