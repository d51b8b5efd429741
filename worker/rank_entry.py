"""The first code of a run's process (worker/ranks.py): import the run's code by name, then
run it, keeping the cause of any failure beside the rank's error file, where the worker
reads it (grpo/parallel/kept_cause.py).

The run's code (worker/ranks.py and with it torch, transformers and the trainer) is named,
not imported by this module, so that its import happens here, under the guard: a package
changed or removed under the worker since it started fails that import with its
traceback kept, rather than the process dying before any code of ours ran. `loaded` is set
once the import succeeded: a run's process that failed without setting it tells the
worker that its environment is at fault, not the run (worker/environment.py). (A rank whose
collective broke because another rank is gone waits in the run's code, grpo/parallel/launch.py
worded_rank, so that the launcher names the rank that is gone.)
"""

from __future__ import annotations

import importlib
from multiprocessing.synchronize import Event
from typing import Any

from grpo.parallel.kept_cause import keep_cause


def enter(loaded: Event, target: str, *args: Any) -> Any:
    """Import `target` ("module:function"), set `loaded`, and return `function(*args)`."""
    module, _, name = target.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
    except (Exception, SystemExit) as exc:  # sys.exit(1) in a plugin: where it was called
        keep_cause(exc)
        raise
    loaded.set()
    try:
        return function(*args)
    except (Exception, SystemExit) as exc:  # sys.exit(1) in a plugin: where it was called
        keep_cause(exc)
        raise
