"""The docs site builds with `mkdocs build --strict` (a broken link, a missing anchor or a
page left out of the nav fails it), and its reference pages, written from the code at build
time (docs/hooks/reference.py), hold every JobSpec field, nested sections and each reward
kind's fields included, and every GRPO_* setting. The README stays a short front door whose
links land on files that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from app.settings import Settings
from grpo.spec import JobSpec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's banner about MkDocs 2
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-6000:]
    return out


def nested_models(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds (through Optional, tuples, lists, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return nested_models(typing.get_args(annotation)[0])
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += nested_models(arg)
    return found


def kind_of(model: type[BaseModel]) -> str:
    """A union member's discriminator value (its `name` literal), else its class name."""
    name = model.model_fields.get("name")
    return (
        str(name.default) if name is not None and isinstance(name.default, str) else model.__name__
    )


def field_paths(model: type[BaseModel]) -> Iterator[str]:
    """Every field's dotted path, breadth first, each model once at the first path it takes
    (`data.source`, `rewards[http].url`; `eval.rewards` is itself a path, its entries are
    the `rewards[...]` ones)."""
    seen: set[type[BaseModel]] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("", model)]
    while queue:
        prefix, current = queue.pop(0)
        for name, field in current.model_fields.items():
            path = f"{prefix}.{name}" if prefix else name
            yield path
            members = nested_models(field.annotation)
            for sub in members:
                if sub not in seen:
                    seen.add(sub)
                    queue.append((f"{path}[{kind_of(sub)}]" if len(members) > 1 else path, sub))


def test_every_jobspec_field_is_in_the_built_reference(site: Path) -> None:
    html = (site / "reference" / "jobspec" / "index.html").read_text()
    paths = list(field_paths(JobSpec))
    assert {"beta", "data.source", "rewards[http].url", "eval.every_steps"} <= set(paths)
    missing = [p for p in paths if f"<code>{p}</code>" not in html]
    assert not missing, f"JobSpec fields missing from reference/jobspec: {missing}"


def test_every_setting_is_in_the_built_reference(site: Path) -> None:
    html = (site / "reference" / "settings" / "index.html").read_text()
    names = [f"GRPO_{name.upper()}" for name in Settings.model_fields]
    missing = [n for n in names if f"<code>{n}</code>" not in html]
    assert not missing, f"settings missing from reference/settings: {missing}"
    for name, field in Settings.model_fields.items():
        assert field.description, f"GRPO_{name.upper()} has no docstring to show"


def test_rest_and_cli_references_have_every_route_and_command(site: Path) -> None:
    from app.main import create_app

    rest = (site / "reference" / "rest-api" / "index.html").read_text()
    for path, item in create_app().openapi()["paths"].items():
        for method in item:
            assert f"{method.upper()} {path}" in rest, (method, path)
    from grpo.cli.commands import COMMANDS

    cli = (site / "reference" / "cli" / "index.html").read_text()
    for command in [c.name for c in COMMANDS] + ["datasets upload", "datasets list"]:
        assert f"<code>grpo {command}</code>" in cli, command


def test_grpo_help_lists_every_command_with_its_summary() -> None:
    import subprocess
    import sys

    from grpo.cli.commands import COMMANDS

    grpo = Path(sys.executable).parent / "grpo"
    shown = subprocess.run([grpo, "--help"], capture_output=True, text=True, check=True).stdout
    for command in COMMANDS:
        assert re.search(rf"^\s+{command.name}\s+{re.escape(command.summary)}$", shown, re.M), (
            command.name
        )


def test_readme_is_a_short_front_door_whose_links_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert local, "the README links into the docs"
    assert [link for link in local if not (ROOT / link).exists()] == []


NAV_PAGE = re.compile(r":\s+(\S+\.md)\s*$", re.MULTILINE)
NEWCOMER_PAGES = [
    "how-to/trl-recipes.md",
    "how-to/vllm.md",
    "how-to/tools.md",
    "how-to/doctor.md",
    "how-to/command-line.md",
]
"""What a TRL user looks for first (issue 44, item 5): the README links each of them."""


def test_the_docs_home_links_every_page_of_the_site() -> None:
    home = (ROOT / "docs" / "index.md").read_text()
    pages = NAV_PAGE.findall((ROOT / "mkdocs.yml").read_text())
    assert "how-to/trl-recipes.md" in pages
    assert [p for p in pages if p != "index.md" and f"]({p})" not in home] == []


def test_the_readme_links_the_pages_a_trl_user_looks_for() -> None:
    readme = (ROOT / "README.md").read_text()
    assert [p for p in NEWCOMER_PAGES if f"](docs/{p})" not in readme] == []
