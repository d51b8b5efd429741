"""The worker's fork server, forked from the worker itself as it starts, with the run's code
already imported: no second import of torch, transformers and the trainer.

multiprocessing starts its fork server as a fresh interpreter that imports the preloaded
modules (worker/preload.py's PRELOADED): ~6 s of CPU here, at each worker's first run, for
modules the worker has just imported itself. Instead, once the worker has imported them and
before it starts a thread or opens a connection (Celery starts none until the worker runs),
it forks; the child serves as multiprocessing's fork server (`multiprocessing.forkserver.main`,
its own loop: each rank a clean single-threaded fork of it, as before), and the worker
records it as the running server, so `ensure_running()` at the first run finds it and only
starts a fresh one if this one is gone. What the ranks get is what the server imported then:
the worker's own modules at its start, which worker/preload.py's checks compare with the disk
before every run (a changed environment spawns the run's processes instead, as before).

The child renames itself as multiprocessing's server is named (setproctitle, where it is
installed), so `ps` and the tests tell it from the worker. Not started when
GRPO_PRELOAD_RUNS=0, when the worker already has a second thread (a fork then could copy a
lock another thread holds), or where multiprocessing's server authenticates its clients (newer
Pythons keep a key for that, which this server, written against 3.11's protocol, would not
know); the first run then starts multiprocessing's own.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import socket
import sys
import threading
from multiprocessing import connection, util

from app.settings import get_settings
from worker.preload import PRELOADED

log = logging.getLogger(__name__)
TITLE = "{python} -c from multiprocessing.forkserver import main  # forked from worker {pid}"
"""The child's process title: multiprocessing's own server has `multiprocessing.forkserver`
in its command line, and each process it forks keeps it (tests/processes.py looks for it)."""


def fork_server_here() -> int | None:
    """Import the run's code, fork the fork server from this process and record it as
    multiprocessing's running server; its pid, or None when it was not started."""
    server = multiprocessing.forkserver._forkserver
    if hasattr(server, "_forkserver_authkey") or not get_settings().preload_runs:
        return None  # a server that authenticates its clients (newer Pythons) is not this one
    for name in PRELOADED:
        if name != "__main__":  # this process's main module is the worker's already
            importlib.import_module(name)
    if threading.active_count() > 1:  # the imports included: none may have started one
        log.warning("a thread is running: the first run starts the fork server instead")
        return None
    if getattr(server, "_forkserver_pid", None) is not None:
        return None
    with socket.socket(socket.AF_UNIX) as listener:
        address = connection.arbitrary_address("AF_UNIX")  # type: ignore[attr-defined]
        listener.bind(address)
        if not util.is_abstract_socket_namespace(address):  # as ensure_running() does
            os.chmod(address, 0o600)
        listener.listen()
        alive_r, alive_w = os.pipe()  # the server ends once every holder of alive_w closed it
        sys.stdout.flush()  # nothing buffered before the fork is written twice
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child serves until the worker is gone
            _serve(listener.fileno(), alive_r, alive_w)
        os.close(alive_r)
    server._forkserver_address = address  # type: ignore[attr-defined]
    server._forkserver_alive_fd = alive_w  # type: ignore[attr-defined]
    server._forkserver_pid = pid  # type: ignore[attr-defined]
    log.debug("fork server %d forked from the worker with the run's code", pid)
    return pid


def _serve(listener_fd: int, alive_r: int, alive_w: int) -> None:
    """The child: multiprocessing's fork server loop, then exit without the worker's
    interpreter teardown (its atexit hooks are the worker's)."""
    code = 0
    try:
        os.close(alive_w)
        _retitle()
        multiprocessing.forkserver.main(listener_fd, alive_r, [])
    except SystemExit:  # the loop's end: every client closed its end of the lifeline
        pass
    except BaseException:  # noqa: BLE001 - said on stderr, the worker's log
        code = 1
        sys.excepthook(*sys.exc_info())
    finally:
        sys.stderr.flush()
        os._exit(code)


def _retitle() -> None:
    try:
        from setproctitle import setproctitle
    except ImportError:
        return
    setproctitle(TITLE.format(python=sys.executable, pid=os.getppid()))
