"""Processes a test looks for by their parent: the ranks a launcher started, spawned or
forked from the worker's fork server (worker/preload.py)."""

from __future__ import annotations

from pathlib import Path

FORK_SERVER = b"multiprocessing.forkserver"
"""In the fork server's command line, and in each process it forks (a fork keeps it)."""


def rank_processes(pid: int, *, group: bool = False) -> list[int]:
    """Live ranks started by `pid` (spawned children, or children of the fork server that
    `pid` started), or the live ranks in process group `pid`, oldest first; not
    multiprocessing's resource tracker, not the fork server itself."""
    procs: dict[int, tuple[int, int, int, bytes]] = {}  # pid: (parent, group, start, cmdline)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if fields[0] != "Z":
            parent, pgrp, start = int(fields[1]), int(fields[2]), int(fields[19])
            procs[int(stat.parent.name)] = (parent, pgrp, start, cmdline)

    def forked(parent: int) -> bool:  # a child of a fork server
        return FORK_SERVER in procs.get(parent, (0, 0, 0, b""))[3]

    found = []
    for child, (parent, pgrp, start, cmdline) in procs.items():
        spawned = b"spawn_main" in cmdline
        is_rank = spawned or (FORK_SERVER in cmdline and forked(parent))
        if not is_rank:
            continue
        if group:
            ours = pgrp == pid
        else:
            ours = parent == pid if spawned else procs[parent][0] == pid
        if ours:
            found.append((start, child))
    return [p for _, p in sorted(found)]


def alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (not zombies): a rank orphaned by its launcher would
    have a new parent, so a test looks for the pids it saw."""
    found = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(pid)
    return found
