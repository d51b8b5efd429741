"""Processes a test looks for by their parent: the ranks a launcher spawned."""

from __future__ import annotations

from pathlib import Path


def rank_processes(pid: int, *, group: bool = False) -> list[int]:
    """Live spawned children of `pid`, or spawned members of process group `pid` (the
    ranks; not multiprocessing's resource tracker), oldest first."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[2 if group else 1]) == pid and fields[0] != "Z":
            if b"spawn_main" in cmdline:
                found.append((int(fields[19]), int(stat.parent.name)))  # (start time, pid)
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
