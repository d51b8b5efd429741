"""What a store error means for a client: the database cannot be reached, or a disk is full.

The API answers both with a retryable status instead of a 500 (app/api/outages.py); this
module only classifies, so no SQL library is imported outside app/store/.
"""

from __future__ import annotations

import errno

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

UNREACHABLE = (OperationalError, InterfaceError, PoolTimeout)
"""Connection refused or lost, a pool with no connection to lend, a server shutting down."""
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """No space left: an OSError with ENOSPC/EDQUOT, or a database that says so (SQLite's
    "database or disk is full", PostgreSQL's "No space left on device" / SQLSTATE 53100)."""
    if isinstance(exc, OSError):
        return exc.errno in NO_SPACE_ERRNOS
    if isinstance(exc, DBAPIError):
        text = str(exc.orig).lower()
        code = getattr(exc.orig, "sqlstate", None)
        return code == "53100" or "disk is full" in text or "no space left" in text
    return False


def is_unreachable(exc: BaseException) -> bool:
    return isinstance(exc, UNREACHABLE) and not is_disk_full(exc)
