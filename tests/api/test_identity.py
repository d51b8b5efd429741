"""GRPO_API_TOKENS entries: `name:role:token`, or a bare token (an admin, as before roles)."""

from __future__ import annotations

import pytest

from app.identity import parse_api_tokens
from app.settings import Settings


def test_a_bad_role_is_refused_at_startup_without_echoing_the_token() -> None:
    with pytest.raises(ValueError, match="entry 2") as caught:
        Settings(api_tokens="old-token,bob:superuser:bob-token")
    assert "bob-token" not in str(caught.value)


def test_a_bare_token_is_an_admin_and_named_entries_keep_their_role() -> None:
    [(token, who)] = Settings(api_tokens="old-token").token_identities
    assert token == "old-token" and who.role == "admin" and who.is_admin
    pairs = dict(parse_api_tokens("ann:member:a:b:c, vic:viewer:v"))
    assert pairs["a:b:c"].name == "ann" and pairs["a:b:c"].role == "member"
    assert not pairs["v"].can_write
    assert pairs["a:b:c"].owns("ann") and not pairs["a:b:c"].owns("bob")
    assert not pairs["a:b:c"].owns(None)
