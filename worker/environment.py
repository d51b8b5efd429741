"""Whether the Python environment a worker runs in is still the one it started with.

The worker imported its code (torch, transformers, ours) when it started, and each run's
processes import it afresh (worker/ranks.py). A package upgraded, downgraded or removed
under a running worker (a `pip install` beside it, a shared volume updated) sets the two
apart: the run's processes fail to import, or train with other code than the worker's.
That is the worker's problem, not the run's, and the worker notices it twice:

- before it claims a run: a distribution it has imported from (one that provides a module
  in its `sys.modules`) now has another version, or is gone (`remember` took the versions
  when it started; importlib.metadata reads them as `pip list` does);
- after a run's process exited before it could import the run's code (worker/rank_entry.py;
  CodeNotLoaded), whatever the versions say.

Either way it says so once in its log, asking for a restart, hands the run back to the
queue (it is never failed for this), and from then on declines every run, as a worker that
does not fit a run declines it (worker/job.py): the runs wait for a healthy worker. A
distribution installed beside the others is no change: a reward or tool plugin installed
while the worker runs is found by the next run (docs/how-to/deployment.md).
"""

from __future__ import annotations

import logging
import re
import sys
from importlib.metadata import PackageNotFoundError, distributions, packages_distributions, version

log = logging.getLogger(__name__)
RESTART = "the worker's Python environment changed since it started ({what}); restart the worker"
SHOWN_CHANGES = 5
"""Changes named in the message; the rest are counted."""
_started: dict[str, str] = {}
"""Each distribution's version when the worker started (its normalised name: version)."""
_imported: set[str] = set()
"""The distributions the worker had imported from when it started."""
_broken: list[str] = []
"""Why this worker declines every run (set once, until it is restarted)."""


def installed() -> dict[str, str]:
    """{normalised name: version} of the distributions on sys.path, the first of a name
    winning as it does for an import."""
    found: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.setdefault(normalised(name), dist.version)
    return found


def normalised(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def remember() -> None:
    """Take the versions and the imported distributions as they are now (the worker's start).
    An environment whose distributions cannot be read is said once and not watched: the
    watch must never stop a worker."""
    _started.clear()
    _imported.clear()
    _broken.clear()
    try:
        versions = installed()
        provides = packages_distributions()
    except Exception:  # noqa: BLE001 - any unreadable metadata
        log.exception("cannot read the installed distributions; a changed environment goes unseen")
        return
    tops = {name.partition(".")[0] for name in list(sys.modules)}
    _imported.update(normalised(d) for top in tops for d in provides.get(top, ()))
    _started.update(versions)


def changes(now: dict[str, str] | None = None) -> tuple[list[str], bool]:
    """What changed since `remember` (`torch 2.13.0 -> 2.14.0`, `vllm 0.11.0 installed`,
    `peft 0.17.0 removed`), those of imported distributions first; and whether any of these
    is of an imported one."""
    now = installed() if now is None else now
    touched: list[str] = []
    others: list[str] = []
    for name in sorted(set(_started) | set(now)):
        before, after = _started.get(name), now.get(name)
        if before == after:
            continue
        if before is None:
            said = f"{name} {after} installed"
        elif after is None:
            said = f"{name} {before} removed"
        else:
            said = f"{name} {before} -> {after}"
        (touched if name in _imported and before is not None else others).append(said)
    return touched + others, bool(touched)


def problem() -> str | None:
    """Why this worker must not take a run: its environment changed under it (said once in
    its log, and from then on for every run); None while it is the one it started with."""
    if _broken:
        return _broken[0]
    if not _started:
        return None  # nothing to compare with: never remembered (not a started worker)
    try:
        if not _imported_changed():
            return None
        changed, is_imported = changes()
    except Exception:  # noqa: BLE001 - unreadable metadata is no reason to stop taking runs
        log.exception("cannot read the installed distributions")
        return None
    return _say(_listed(changed)) if is_imported else None


def _imported_changed() -> bool:
    """Whether a distribution the worker imported from has another version now, or is
    gone: one metadata lookup each, before every claim (reading every installed
    distribution, as `changes` does to word the message, took ~1 s a claim)."""
    for name in _imported:
        try:
            if version(name) != _started.get(name):
                return True
        except PackageNotFoundError:
            return True
    return False


def broken(what: str) -> str:
    """Note that the environment broke (`what`: how), with the versions that changed if any,
    say so once in the log, and return the message every declined run is told."""
    if _broken:
        return _broken[0]
    try:
        changed = changes()[0] if _started else []
    except Exception:  # noqa: BLE001 - the message goes out without the versions
        changed = []
    return _say(f"{what}; {_listed(changed)}" if changed else what)


def _say(what: str) -> str:
    message = RESTART.format(what=what)
    _broken.append(message)
    log.error("%s", message)
    return message


def _listed(changed: list[str]) -> str:
    shown = ", ".join(changed[:SHOWN_CHANGES])
    more = len(changed) - SHOWN_CHANGES
    return f"{shown} and {more} more" if more > 0 else shown
