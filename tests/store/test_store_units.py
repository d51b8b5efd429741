"""Every store function handed a Session ends its own transaction (app/store/db.py): a
request's session only closes, so a write left open by a function that is no `@unit`
would be rolled back at the end of the request, silently."""

from __future__ import annotations

import ast
from pathlib import Path

STORE = Path(__file__).resolve().parents[2] / "app" / "store"
IN_TRANSACTION = {
    "add_status_event": "runs.py",
    "bulk_insert": "bulk.py",
    "forget_doctor": "steps.py",
    "hold": "lease.py",
    "insert_log": "events.py",
    "lock_run_events": "events.py",
    "mark_woken": "wakeup.py",
    "resume_point": "runs.py",
}
"""Helpers called inside a unit, on its transaction."""
COMPOSED = {"create_run": "runs.py"}
"""Functions that call units one after another (a lost key race rolls back the first)."""


def _session_functions_without_unit() -> set[tuple[str, str]]:
    found = set()
    for path in STORE.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            first = node.args.args[0] if node.args.args else None
            takes_session = (
                first is not None and ast.unparse(first.annotation or ast.Name("")) == "Session"
            )
            is_unit = any(ast.unparse(d) == "unit" for d in node.decorator_list)
            if takes_session and not is_unit:
                found.add((node.name, path.name))
    return found


def test_store_functions_handed_a_session_are_units() -> None:
    allowed = set(IN_TRANSACTION.items()) | set(COMPOSED.items())
    bad = _session_functions_without_unit() - allowed
    assert not bad, f"store functions taking a Session without @unit: {sorted(bad)}"


def test_the_check_finds_a_function_without_unit() -> None:
    assert ("create_run", "runs.py") in _session_functions_without_unit()
