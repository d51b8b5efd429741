"""One machine-wide lock between tests that change this machine's own network (the hosts of
tests/hosts.py: a bridge, its address, veths) and the browser tests.

Chromium watches the machine's addresses and links (netlink) and, on any change, aborts what
it has in flight with net::ERR_NETWORK_CHANGED, loopback requests included: a page whose
scripts were loading while another xdist worker built a bridge came up half made (a CI run
failed that way). No Chromium switch turns this off. So a page holds the lock shared for its
test, and a network change holds it exclusively, then keeps it a few seconds more while
Chromium's notification may still arrive.

Two files make it fair: a change first takes the gate, so no new page starts while it waits
for the pages already open to finish, and three xdist workers' pages cannot keep it out.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GATE = Path("/tmp/grpo-tests-netchange.gate")
LOCK = Path("/tmp/grpo-tests-netchange.lock")
SETTLE_S = 3.0
"""How long a change keeps the lock after its last `ip` command: Chromium's network-change
calculator waits up to 2 s before it reports a change."""


@contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def steady_network() -> Iterator[None]:
    """While held, nothing in this suite changes the machine's network."""
    with _flock(GATE, fcntl.LOCK_EX):
        handle = open(LOCK, "a")  # noqa: SIM115 - held past the gate
        fcntl.flock(handle, fcntl.LOCK_SH)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


@contextmanager
def changing_network() -> Iterator[None]:
    """Held while the machine's own links or addresses change, and SETTLE_S after."""
    with _flock(GATE, fcntl.LOCK_EX), _flock(LOCK, fcntl.LOCK_EX):
        try:
            yield
        finally:
            time.sleep(SETTLE_S)
