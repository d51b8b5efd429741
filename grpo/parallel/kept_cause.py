"""A launched rank's failure cause, kept on disk for the process that launched it.

The elastic launcher gives each rank an error file (its path in TORCHELASTIC_ERROR_FILE)
where it records the rank's exception as one line and a raw traceback. Beside it a rank
keeps its cause (grpo/cause.py: the innermost exception, the last frames, secrets
scrubbed, bounded) as JSON, and the launching process reads it back next to the error
file of the rank that failed (grpo/parallel/launch.py failure_cause). Imports no torch:
a rank writes it even when the run's code could not be imported.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from grpo.cause import Cause, cause_of

ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"
CAUSE_FILE = "cause.json"


PEER_LOST = (
    "remote worker",  # gloo: "... Check the logs of the remote worker"
    "remote process",  # NCCL: "remote process exited or there was a network error"
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
)
"""What a rank's collective raises when another rank is gone: a consequence, not a cause."""

PEER_LOST_WAIT_S = 3.0
"""How long a rank whose collective broke on a peer's end waits before it fails: its launcher
polls the ranks every 0.5 s and names the first failed rank it finds; a peer killed by a
signal leaves no error file, so only the launcher can name it, and only if it sees the
peer's exit before this rank's (grpo/parallel/launch.py worded_rank)."""


def is_peer_lost(text: str) -> bool:
    """True for an exception's text that says another rank is gone."""
    return any(marker in text for marker in PEER_LOST)


def keep_cause(exc: BaseException) -> None:
    """Write the cause of `exc` beside this rank's error file (nothing outside a launched
    rank). Never raises: the failure it reports must stay the one the rank raises."""
    error_file = os.environ.get(ERROR_FILE_ENV)
    if not error_file:
        return
    try:
        path = Path(error_file).with_name(CAUSE_FILE)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cause_of(exc).as_dict()))
    except Exception as failed:  # noqa: BLE001 - the rank's own failure matters more
        print(f"could not keep the cause of the failure: {failed!r}", file=sys.stderr)


def read_cause(error_file: str | Path) -> Cause | None:
    """The cause kept beside a rank's error file; None when it kept none."""
    try:
        data = json.loads(Path(error_file).with_name(CAUSE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return Cause.from_dict(data)
