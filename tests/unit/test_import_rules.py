"""Imports flow one way (STYLE.md): the API never loads torch; grpo/ never loads the server."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


def test_api_app_imports_without_torch_or_training_code() -> None:
    loaded = _loaded_after("import app.main")
    assert "torch" not in loaded and "transformers" not in loaded
    assert "worker.tasks" not in loaded and "grpo.trainer" not in loaded


def test_spec_imports_without_torch() -> None:
    assert "torch" not in _loaded_after("import grpo.spec")


def _imported_modules(folder: str) -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            found |= {(str(path.relative_to(ROOT)), n) for n in names}
    return found


def test_grpo_library_never_imports_server_queue_or_sql() -> None:
    banned = ("app", "worker", "fastapi", "sqlalchemy", "celery")
    bad = {(p, m) for p, m in _imported_modules("grpo") if m.split(".")[0] in banned}
    assert not bad


def test_store_never_imports_http_or_torch() -> None:
    bad = {
        (p, m)
        for p, m in _imported_modules("app/store")
        if m.split(".")[0] in ("fastapi", "torch", "transformers")
    }
    assert not bad
