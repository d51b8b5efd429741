"""A run's processes start with the run's code already imported, while the worker's Python
environment is the one it started with.

Each run trains in fresh processes, one per rank (worker/ranks.py). Spawned, each imports
torch, transformers and the trainer again: about 5 s of CPU here before its first step, for
a tiny model whose steps take 50 ms. Instead each rank is forked from multiprocessing's fork
server with the run's code (worker/ranks.py and its imports) and the worker's main module
imported in it: a clean single-threaded process (the worker's own threads, sockets and
database connections are never forked), with nothing left to import. The worker forks that
server from itself as it starts (worker/fork_server.py), so the code is imported once per
worker; where that server is not running, the first run starts multiprocessing's own, which
imports PRELOADED afresh.

The server's modules are those the worker found when it started, so a rank forked from it
could not notice a package changed or broken under the worker since (worker/environment.py
expects a run's process that cannot import the run's code to fail, and the worker to hand
the run back and ask for a restart). The worker therefore forks ranks only while what it
imported is still what an import would find: every top-level module it imported by name
resolves to the same file on sys.path, and no source file of the service's own packages changed
since it started. Otherwise the run's processes are spawned, as before, and import afresh:
the checks cost a few milliseconds a run.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.forkserver
import os
import sys
import time
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Literal

from app.settings import get_settings

log = logging.getLogger(__name__)
PRELOADED = ["__main__", "worker.ranks"]
"""What the fork server imports once: the worker's main module (each rank would import it
again to unpickle its target) and the run's code with torch, transformers and the trainer."""
OWN_PACKAGES = ("app", "grpo", "worker")
_started: dict[str, str | None] = {}
"""{top-level module: the file it was imported from} when the fork server started."""
_since: list[float] = []
"""When it started (time.time()), to compare the own packages' files with."""


def remember() -> None:
    """Take what the worker imported, and from where, as it is now (the worker is ready)."""
    _started.clear()
    _since[:] = [time.time()]
    # only what an import by name finds: a module loaded from a file by its location (a
    # plugin folder's reward file) is found by no import, so no path can shadow it
    _started.update({n: f for n, f in _top_level_files().items() if _origin_found(n) == f})


def start_method() -> Literal["forkserver", "spawn"]:
    """How the next run's processes start: forked from the preloaded server (started now if
    it is not yet) while the worker's imports are those an import would find now, else
    spawned. A server that cannot start leaves the runs spawned, as they were."""
    if not _since or not get_settings().preload_runs:
        return "spawn"  # not a started worker, or told to (GRPO_PRELOAD_RUNS=0)
    changed = _changed()
    if changed is not None:
        log.info("%s since the worker started: this run's processes import afresh", changed)
        return "spawn"
    try:
        multiprocessing.set_forkserver_preload(PRELOADED)
        multiprocessing.forkserver.ensure_running()
    except Exception:  # noqa: BLE001 - spawning still works
        log.exception("cannot start the fork server; each run's processes import its code")
        return "spawn"
    return "forkserver"


def stop() -> None:
    """End the fork server and wait for it (the worker is stopping): its ranks were its
    children, and a server left to exit on its own would not be waited for by anyone's
    process that counts its CPU time (tests/budget.py)."""
    server = multiprocessing.forkserver._forkserver
    if getattr(server, "_forkserver_pid", None) is None:
        return
    try:
        # closes its lifeline, which ends it, and waits for it (private: not in typeshed)
        getattr(server, "_stop")()  # noqa: B009
    except Exception:  # noqa: BLE001 - it ends with the worker anyway
        log.debug("the fork server did not stop cleanly", exc_info=True)


def leave_server() -> None:
    """In a rank forked from the server: close this process's copy of the server's
    lifeline. multiprocessing hands every forked process one (a server lives while any of
    its clients does), so a rank holding it kept the server up after the worker died, and
    with it the rank, whose parent-death signal waits for the server's end: the run went on
    training beside its requeued successor. Closed, the server ends with the worker, and
    the rank with the server. Nothing to do in a spawned rank."""
    server = multiprocessing.forkserver._forkserver
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is None:
        return
    server._forkserver_alive_fd = None  # type: ignore[attr-defined]
    try:
        os.close(fd)
    except OSError:
        pass


def _top_level_files() -> dict[str, str | None]:
    """{top-level module: its file} for the modules imported from files (not built in) under
    their own name: a package may put a submodule in sys.modules under a second, top-level
    name (vllm puts its model_executor there), which no import would find."""
    files: dict[str, str | None] = {}
    for name, module in list(sys.modules.items()):
        if "." in name or name == "__main__" or name.startswith("_"):
            continue
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.name == name and spec.has_location and spec.origin:
            files[name] = spec.origin
    return files


def _find(name: str) -> ModuleSpec | None:
    """What `import name` would load now, were it not imported yet: the import system's
    finders asked in turn (importlib.util.find_spec would answer from sys.modules)."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, None)
        except (ImportError, ValueError):
            return None
        if spec is not None:
            return spec  # type: ignore[no-any-return]
    return None


def _origin_found(name: str) -> str | None:
    """The file `import name` would load now; None: no import finds it."""
    found = _find(name)
    return found.origin if found is not None else None


def _changed() -> str | None:
    """What changed under the worker (a module now found elsewhere, an own source file
    edited), or None."""
    for name, origin in _started.items():
        now = _origin_found(name)
        if now != origin:
            return f"`import {name}` finds {now or 'nothing'} where it found {origin}"
    since = _since[0]
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in OWN_PACKAGES:
            continue
        file = getattr(module, "__file__", None)
        try:
            if file and Path(file).stat().st_mtime > since:
                return f"{file} changed"
        except OSError:
            return f"{file} is gone"
    return None
