"""The architecture page (docs/explanation/architecture.md) names only what exists: every file
or folder path it gives (`grpo/rollout/rounds.py`, `app/store/`), every dotted module path
(`grpo.rollout.rounds`) down to the class, function or method it ends in
(`grpo.training.trainer.TrainingLoop.step`), and every file it cites by name (`formulas.md`, or
a reference page the docs build writes). A module moved or renamed fails here, not silently on
the page."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "explanation" / "architecture.md"
ROOTS = ("app", "worker", "grpo", "tests", "tools", "migrations", "docs", "bench")

FOLDER_PATH = re.compile(rf"(?<![\w./<-])((?:{'|'.join(ROOTS)})/[\w./-]*)")
DOTTED_PATH = re.compile(r"(?<![\w./-])((?:app|worker|grpo)(?:\.\w+)+)")
FILE_NAME = re.compile(r"(?<![\w./-])([\w./-]+\.(?:py|md))\b")


def _generated_pages() -> set[str]:
    """The site paths of the reference pages the docs build writes (tools/reference/'s PAGES
    keys, read without importing it: it loads the app)."""
    tree = ast.parse((ROOT / "tools" / "reference" / "__init__.py").read_text())
    pages = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and n.target.id == "PAGES"
    )
    assert isinstance(pages, ast.Dict)
    return {k.value for k in pages.keys if isinstance(k, ast.Constant)}


def _defined_names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a module's or a class's body defines: functions, classes, assignments."""
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names |= {t.id: node for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


def _module_file(parts: list[str]) -> Path | None:
    path = ROOT.joinpath(*parts)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def dotted_problem(dotted: str) -> str | None:
    """Why `dotted` names nothing (None when it does): the longest module prefix, then each
    further name defined in the module's or the class's body."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        source = _module_file(parts[:cut])
        if source is None:
            continue
        body = ast.parse(source.read_text()).body
        for name in parts[cut:]:
            node = _defined_names(body).get(name)
            if node is None:
                return f"{'.'.join(parts[:cut])} defines no {name}"
            body = node.body if isinstance(node, ast.ClassDef) else []
        return None
    return "no such module"


def path_problems(text: str, *, page_dir: Path) -> list[str]:
    """Every path of `text` that names nothing, with why."""
    problems = []
    for path in set(FOLDER_PATH.findall(text)):
        if not (ROOT / path.rstrip(".")).exists():
            problems.append(f"{path}: no such file or folder")
    for dotted in set(DOTTED_PATH.findall(text)):
        if (why := dotted_problem(dotted)) is not None:
            problems.append(f"{dotted}: {why}")
    for name in set(FILE_NAME.findall(text)):
        if name.split("/")[0] in ROOTS:
            continue  # a path from the repository's root, checked above
        in_site = os.path.relpath((page_dir / name).resolve(), ROOT / "docs")
        if not (page_dir / name).exists() and not (ROOT / name).exists():
            if Path(in_site).as_posix() in _generated_pages():
                continue  # written from the code at build time (docs/hooks/reference.py)
            problems.append(f"{name}: not in the repository")
    return sorted(problems)


def test_every_path_the_architecture_page_names_exists() -> None:
    text = PAGE.read_text()
    assert "grpo/rollout/rounds.py" in text or "grpo.rollout.rounds" in text  # it names modules
    assert path_problems(text, page_dir=PAGE.parent) == []


def test_a_wrong_path_on_the_page_is_found() -> None:
    text = (
        "the rounds (`grpo/rounds.py`, `grpo.rounds`), `grpo.training.trainer.TrainingLoop.nope`,"
        " `worker.job.no_such_function`, see STYLE.md and [The formulas](formulas.md); right:"
        " `grpo/rollout/rounds.py`, `grpo.training.trainer.TrainingLoop.step`, `app/store/`,"
        " [GRPO_PORT](../reference/settings.md#grpo_port); wrong: [x](../reference/nope.md)."
    )
    assert path_problems(text, page_dir=PAGE.parent) == [
        "../reference/nope.md: not in the repository",
        "STYLE.md: not in the repository",
        "grpo.rounds: grpo defines no rounds",
        "grpo.training.trainer.TrainingLoop.nope: grpo.training.trainer defines no nope",
        "grpo/rounds.py: no such file or folder",
        "worker.job.no_such_function: worker.job defines no no_such_function",
    ]
