"""Who is calling: the name and role a bearer token stands for (GRPO_API_TOKENS).

An entry of GRPO_API_TOKENS is `name:role:token` with role `admin`, `member` or `viewer`,
or a bare `token` with no colon: the single-token setups of before roles, each such token
an admin named `admin`. An entry with a colon that is not `name:role:token` with a known
role is refused at startup: a typo in a role never makes an admin.

- admin: everything, on every run.
- member: submits runs; cancels, resumes, deletes and downloads the weights of its own.
- viewer: reads (and never downloads weights).

With no tokens configured the service is open and every caller is an unnamed admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Role = Literal["admin", "member", "viewer"]
ROLES: tuple[str, ...] = get_args(Role)


@dataclass(frozen=True)
class Identity:
    name: str | None
    """None: no tokens are configured (an open service)."""
    role: Role

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def can_write(self) -> bool:
        return self.role != "viewer"

    def owns(self, owner: str | None) -> bool:
        """May act on a run submitted by `owner`: its owner or an admin (a run with no
        recorded owner is an admin's)."""
        return self.is_admin or (owner is not None and owner == self.name)


OPEN = Identity(name=None, role="admin")


def parse_api_tokens(raw: str) -> list[tuple[str, Identity]]:
    """(token, identity) for each comma-separated entry; ValueError names a bad entry by
    its position (never its token)."""
    pairs = []
    for position, entry in enumerate((e.strip() for e in raw.split(",")), start=1):
        if not entry:
            continue
        if ":" not in entry:
            pairs.append((entry, Identity(name="admin", role="admin")))
            continue
        name, _, rest = entry.partition(":")
        role, _, token = rest.partition(":")
        if not name.strip() or role not in ROLES or not token.strip():
            raise ValueError(
                f"GRPO_API_TOKENS entry {position} is not `name:role:token` with role one of "
                f"{', '.join(ROLES)} (or a bare token with no colon)"
            )
        pairs.append((token.strip(), Identity(name=name.strip(), role=role)))  # type: ignore[arg-type]
    return pairs
