"""Imports flow one way (STYLE.md): the API never loads torch; grpo/ never loads the server.

| code | may import | never |
|---|---|---|
| grpo/ | torch, transformers, pydantic | app, worker, fastapi, sqlalchemy, celery |
| app/store/ | sqlalchemy, app.settings, torch-free grpo modules | fastapi, torch |
| rest of app/ | fastapi, app.store, app.queue, torch-free grpo modules | torch, worker |
| worker/ | celery, grpo, app.store, app.queue, app.settings | app.api, app.main |

The torch-free grpo modules are TORCH_FREE_GRPO below; app/ imports no other grpo module,
even inside a function, and each of them imports without torch or transformers.

No import loops between modules either, counting imports inside functions and under
TYPE_CHECKING; within grpo/, GRPO_SUBPACKAGES and GRPO_CORE say which subpackage may import
which (and CORE_USERS which of them may import the core), and
an import of our own code inside a function is allowed only where LAZY_IMPORTS_OF_OUR_CODE
says why. The lint-time tools (tools/) are never imported by served code.
"""

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
    assert "worker.tasks" not in loaded and "grpo.training.trainer" not in loaded


def test_importing_grpo_and_its_python_api_loads_no_torch() -> None:
    loaded = _loaded_after("import grpo; from grpo import train, Trainer, submit")
    assert (
        "torch" not in loaded
        and "transformers" not in loaded
        and "grpo.training.trainer" not in loaded
    )
    assert "grpo.python_api" in loaded
    assert "grpo.python_api" not in _loaded_after("import grpo")  # nothing until asked


TORCH_FREE_GRPO = (
    "grpo.spec",  # JobSpec: request bodies, stored specs
    "grpo.spec.rewards",  # reward entries, checked at submit
    "grpo.spec.logging",  # the trackers a spec may name
    "grpo.spec.sources",  # what `model` and `data.source` point at
    "grpo.spec.hub",  # whether a hub model id can be loaded, checked at submit
    "grpo.data.records",  # a JSONL record, checked at upload
    "grpo.data.parquet",  # a parquet dataset read a batch at a time, checked at upload
    "grpo.data.parquet_shape",  # a parquet file's shape and rows' decoded sizes, at upload
    "grpo.data.dataset_limits",  # how big and deep an uploaded dataset may be
    "grpo.spec.trl_config",  # a TRL GRPOConfig as a JobSpec (POST /api/specs/convert)
    "grpo.spec.yaml_input",  # the one rule for YAML a user hands us (no aliases, bounded)
    "grpo.data.record_files",  # a dataset file's records one at a time, scanned at submit
    "grpo.spec.hints",  # the words of a spec's errors: did you mean, TRL's names, bounds
    "grpo.cli.commands",  # every command's one-line summary, for both parsers
    "grpo.spec.demo",  # what the demo promises, quoted by its preset
    "grpo.report",  # what a step, an eval and a checkpoint report, stored by app/store
    "grpo.rewards.kind",  # what a reward kind is told at submit
    "grpo.rewards.registry",  # every reward kind, whose checks run at submit
    "grpo.rewards.trial_report",  # what a reward test and a preflight are asked and answer
    "grpo.rewards.failure_kinds",  # the fixed list of ways a reward fails, told by a test
    "grpo.spec.token_env",  # which worker variables a spec may name as a token, checked at submit
    "grpo.doctor",  # the run doctor's rules, run by the worker and by the API on stored runs
    "grpo.spec.tools",  # tool entries, checked at submit
    "grpo.tools.kind",  # what a tool kind is told at submit
    "grpo.tools.registry",  # every tool kind, whose checks run at submit
    "grpo.spec.plugins",  # the plugin folders' function names, checked at submit; `grpo plugins`
    "grpo.client",  # the REST client: the CLI's service commands, `from grpo import submit`
    "grpo.spec.endpoints",  # the URL rule and how GRPO_*_HOSTS lists are read and matched
    "grpo.spec.vllm",  # where a server-mode run's vLLM server may be, checked at submit
    "grpo.engines.kind",  # what an engine kind is told at submit
    "grpo.engines.registry",  # every engine kind, whose checks run at submit
)
"""The grpo modules app/ may import: pydantic and the standard library, never torch."""


def test_app_imports_only_torch_free_grpo_modules() -> None:
    bad = {
        (p, m)
        for p, m in _imported_modules("app")
        if m.split(".")[0] == "grpo" and m not in TORCH_FREE_GRPO
    }
    assert not bad, f"app/ imports grpo modules outside TORCH_FREE_GRPO: {sorted(bad)}"


def test_no_grpo_module_shadows_a_public_name() -> None:
    """`from grpo import train` must give the function however grpo's modules were loaded: a
    subpackage or module of that name would replace the lazy name once imported."""
    import grpo

    modules = {p.stem for p in (ROOT / "grpo").iterdir() if p.suffix == ".py" or p.is_dir()}
    assert not set(dir(grpo)) & modules


def test_the_torch_free_grpo_modules_import_without_torch() -> None:
    loaded = _loaded_after(f"import {', '.join(TORCH_FREE_GRPO)}")
    assert "torch" not in loaded and "transformers" not in loaded


def _imported_modules(folder: str, *, with_names: bool = False) -> set[tuple[str, str]]:
    """(file, module) for every import under `folder`, in function bodies too; with_names
    adds `module.name` for each name of a `from module import name`."""
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                if with_names:
                    names += [f"{node.module}.{a.name}" for a in node.names]
            found |= {(str(path.relative_to(ROOT)), n) for n in names}
    return found


PACKAGES = ("app", "worker", "grpo")
SQL_MODULES = ("sqlalchemy", "psycopg", "psycopg2", "sqlite3", "asyncpg")
SESSION_MAKERS = ("app.store.db.get_engine", "app.store.db.make_engine")
SESSION_OPENERS = ("session", "new_session", "call")
"""What app.store.db opens a session with."""
MAY_OPEN_SESSIONS = (
    "app/api/deps.py",
    "app/cli.py",
    "app/store/db.py",
    "worker/",
    # a long run's diagnosis goes on after the answer, a session per stretch, as a worker's
    "app/api/routes/doctor.py",
)


def test_only_the_store_issues_sql() -> None:
    """No SQL library, and no session or engine of the store, outside app/store/."""
    bad = {
        (p, m)
        for folder in PACKAGES
        for p, m in _imported_modules(folder, with_names=True)
        if not p.startswith("app/store/")
        and (m.split(".")[0] in SQL_MODULES or m in SESSION_MAKERS)
    }
    assert not bad, f"SQL outside app/store/: {sorted(bad)}"


def _package_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path [a, b, ..., a], or None (depth-first, each node once)."""
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str] | None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in path:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in done and (found := walk(nxt, [*path, nxt])):
                return found
        done.add(node)
        return None

    return next((c for start in sorted(edges) if (c := walk(start, [start]))), None)


def test_no_cycle_between_top_level_packages() -> None:
    edges: dict[str, set[str]] = {package: set() for package in PACKAGES}
    for package in PACKAGES:
        for _, module in _imported_modules(package):
            target = module.split(".")[0]
            if target in PACKAGES and target != package:
                edges[package].add(target)
    assert _package_cycle(edges) is None, (
        f"import cycle: {' -> '.join(_package_cycle(edges) or [])}"
    )


def test_the_cycle_finder_finds_cycles() -> None:
    assert _package_cycle({"app": {"grpo"}, "worker": {"app", "grpo"}, "grpo": set()}) is None
    assert _package_cycle({"app": {"worker"}, "worker": {"app"}}) == ["app", "worker", "app"]


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


def _session_openers(folder: str) -> set[tuple[str, str]]:
    """(file, `db.name`) for every use of a session opener of app.store.db under `folder`:
    `db.session(...)` after `from app.store import db`, or the name imported itself."""
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.ImportFrom) and node.module == "app.store.db":
                name = next((a.name for a in node.names if a.name in SESSION_OPENERS), None)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "db"
                and node.attr in SESSION_OPENERS
            ):
                name = node.attr
            if name:
                found.add((str(path.relative_to(ROOT)), f"db.{name}"))
    return found


def test_only_the_request_dependency_the_worker_and_the_cli_open_sessions() -> None:
    """Store functions take the session they work in; a request gets its own from
    app/api/deps.py (SessionDep), the worker and the CLI open theirs (STYLE.md)."""
    bad = {
        (p, use)
        for folder in PACKAGES
        for p, use in _session_openers(folder)
        if not p.startswith(MAY_OPEN_SESSIONS)
    }
    assert not bad, f"sessions opened outside app/api/deps.py, worker/ and the CLI: {sorted(bad)}"


GRPO_SUBPACKAGES: dict[str, tuple[str, ...]] = {
    "spec": (),  # JobSpec and its sections, sources: pydantic only
    # a dataset's records and their torch-free readers (JSONL, parquet), loading, tasks
    "data": ("spec",),
    "models": ("spec", "data"),
    "rewards": ("spec", "data", "models"),
    "report": ("spec", "data", "models"),
    # the GRPO math: advantages, objective, KL control, importance correction
    "algo": ("spec", "report"),
    "parallel": ("spec", "models", "rewards", "report"),
    # tool kinds, tool-call parsing, trajectories: what a multi-turn rollout calls
    "tools": ("spec", "rewards"),
    # generation engines (native, vLLM) and the multi-turn tool loop over them
    "engines": ("spec", "data", "models", "rewards", "report", "parallel", "tools"),
    "checkpoints": ("spec", "models", "parallel", "report"),
    "eval": ("spec", "data", "models", "rewards", "report", "algo", "engines"),
    # rules over stored metrics: torch-free, run by app/ too; the preflight's findings read
    # its report (grpo/rewards/trial_report.py, torch-free)
    "doctor": ("spec", "report", "rewards"),
    # one run from every door: its environment, its sinks, the trackers among them, and the
    # rewards' preflight before its first step (not on a resumed attempt: checkpoints),
    # whose findings it logs at the run doctor's severity
    "run": ("spec", "data", "rewards", "report", "checkpoints", "doctor"),
    "cli": ("spec", "data", "models", "report", "parallel", "checkpoints", "eval", "run"),
}
"""Which grpo subpackage may import which, bottom-up: each names only those above it.
grpo's top-level modules (its public face and what every part shares: python_api, client,
failures, cause, scrub) may import any subpackage; a subpackage in FOUNDATION never imports
a top-level module."""
FOUNDATION = ("spec", "data", "models")

GRPO_CORE: dict[str, tuple[str, ...]] = {
    # the Rollout type and native decode loop, rounds, dynamic sampling, the group sources
    "rollout": (
        *("spec", "data", "models", "rewards", "report", "algo", "parallel", "engines", "eval"),
    ),
    # the trainer, the update and its step-wide loss inputs, log-probs, reference, optimizer
    "training": (
        *("spec", "data", "models", "rewards", "report", "algo", "parallel", "tools"),
        *("engines", "checkpoints", "eval", "rollout"),
    ),
}
"""The algorithm core, which the subpackages above both serve and use (an engine returns a
Rollout; the trainer drives the engine), so it stands beside the table rather than in it: each
core package names what it may import, the table's rows and the core packages before it."""
CORE_USERS: dict[str, tuple[str, ...]] = {
    "report": ("rollout",),  # a step's report reads its Rollout and stop strings
    "parallel": ("rollout", "training"),  # a rank's share of a Rollout, its log-probs, a Batch
    "engines": ("rollout", "training"),  # engines sample a Rollout for a PolicyView; log-probs
    "eval": ("rollout",),  # held-out sampling for a PolicyView
    "checkpoints": ("training",),  # the reference policy's state is saved with the run's
    "run": ("training",),  # a run drives the trainer
}
"""Which subpackage of the table may import which core package; any other never does."""

LAZY_IMPORTS_OF_OUR_CODE = {
    "grpo/cli/": "`grpo up`, `grpo --help` and the service commands never load the trainer",
    "app/cli.py": "the client commands never load the store or alembic",
    "worker/lifecycle.py": "the device label needs torch; the worker's other paths do not",
    "grpo/rewards/model.py": "the API checks model entries; only the worker loads the classifier",
    "grpo/engines/registry.py": "the API checks a spec's engine kind; only a run builds an engine",
    "grpo/python_api.py": "`from grpo import train` loads torch only when training starts",
    "grpo/data/parquet.py": "pyarrow and numpy load when a parquet file is first read",
}
"""Where an import of our own code inside a function is allowed, and why: keeping a heavy
dependency out of a path that does not need it. Anywhere else, a shared type goes into a
third module instead."""


def _module_imports(root: Path, packages: tuple[str, ...]) -> dict[str, dict[str, bool]]:
    """{module: {module of ours it imports: whether inside a function}} for every .py of
    `packages` under `root`, counting imports in function bodies and TYPE_CHECKING too."""
    paths = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, dict[str, bool]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text())
        in_function = {
            id(node)
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(fn)
        }
        targets: dict[str, bool] = {}
        for node in ast.walk(tree):
            found: list[str] = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for target in (t for t in found if t in paths and t != name):
                targets[target] = targets.get(target, False) or id(node) in in_function
        graph[name] = targets
    return graph


OUR_CODE = (*PACKAGES, "tools")


def test_no_import_cycle_between_modules() -> None:
    graph = _module_imports(ROOT, OUR_CODE)
    cycle = _package_cycle({m: set(targets) for m, targets in graph.items()})
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_the_module_graph_sees_a_loop_through_an_import_inside_a_function(
    tmp_path: Path,
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg.b import f\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from pkg.a import g\n")
    graph = _module_imports(tmp_path, ("pkg",))
    assert graph["pkg.b"] == {"pkg.a": True} and graph["pkg.a"] == {"pkg.b": False}
    assert _package_cycle({m: set(t) for m, t in graph.items()}) == ["pkg.a", "pkg.b", "pkg.a"]


def _grpo_unit(module: str) -> str:
    """A grpo module's subpackage, or "top" for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (ROOT / "grpo" / parts[1]).is_dir() else "top"


def _may_import(unit: str, other: str) -> bool:
    """Whether a module of grpo subpackage `unit` may import one of `other` (or "top")."""
    if other in (unit, "top"):
        return unit not in FOUNDATION or other == unit
    if unit in GRPO_CORE:
        return other in GRPO_CORE[unit]
    if other in GRPO_CORE:
        return other in CORE_USERS.get(unit, ())
    return other in GRPO_SUBPACKAGES[unit]


def test_grpo_subpackages_import_only_what_the_table_allows() -> None:
    folders = {p.name for p in (ROOT / "grpo").iterdir() if p.is_dir() and p.name[0] != "_"}
    assert folders == {*GRPO_SUBPACKAGES, *GRPO_CORE}, (
        "every grpo subpackage has its row in GRPO_SUBPACKAGES or GRPO_CORE"
    )
    bad = {
        (module, target)
        for module, targets in _module_imports(ROOT, OUR_CODE).items()
        if module.startswith("grpo.") and (unit := _grpo_unit(module)) != "top"
        for target in targets
        if target.startswith("grpo.") and not _may_import(unit, _grpo_unit(target))
    }
    assert not bad, f"imports GRPO_SUBPACKAGES and GRPO_CORE do not allow: {sorted(bad)}"


def test_the_rules_refuse_an_upward_import() -> None:
    assert not _may_import("algo", "rollout") and not _may_import("rollout", "training")
    assert not _may_import("doctor", "training") and not _may_import("spec", "top")
    assert _may_import("training", "rollout") and _may_import("engines", "rollout")


def test_the_subpackage_table_names_only_rows_above_each_row() -> None:
    seen: set[str] = set()
    for unit, allowed in GRPO_SUBPACKAGES.items():
        assert set(allowed) <= seen, f"{unit} may import a subpackage listed below it"
        seen.add(unit)
    for unit, allowed in GRPO_CORE.items():
        assert set(allowed) <= seen, f"{unit} may import a core package listed after it"
        seen.add(unit)
    assert set(CORE_USERS) <= set(GRPO_SUBPACKAGES) - set(FOUNDATION)


def test_our_code_is_imported_inside_functions_only_where_listed() -> None:
    allowed = tuple(
        p.removesuffix(".py").replace("/", ".").rstrip(".") + "." for p in LAZY_IMPORTS_OF_OUR_CODE
    )
    bad = {
        (module, target)
        for module, targets in _module_imports(ROOT, OUR_CODE).items()
        for target, is_lazy in targets.items()
        if is_lazy and not (module + ".").startswith(allowed)
    }
    assert not bad, f"imports inside functions; put the shared type in a third module: {bad}"


def test_the_served_code_never_imports_the_lint_tools() -> None:
    bad = {(p, m) for f in PACKAGES for p, m in _imported_modules(f) if m.split(".")[0] == "tools"}
    assert not bad
