"""Secrets out of text a user is shown: a failed run's cause and error (grpo/cause.py).

Three kinds go: the password of a URL (`postgresql://grpo:hunter2@db/grpo` reads
`postgresql://grpo:***@db/grpo`), a bearer token (`Bearer ***`), and the value of any
variable of the environment that holds a secret: its name says so (TOKEN, SECRET, PASSWORD,
KEY, CREDENTIAL, AUTH: `HF_TOKEN`, `GRPO_API_TOKENS`, `OPENAI_API_KEY`), or the operator
lists it in GRPO_REWARD_TOKEN_ENVS, or its value is a URL with a password (its password).
Values shorter than MIN_SECRET_CHARS are left (too likely to be ordinary words), and so
is a variable holding a file's path (where a secret is, not the secret). Knows nothing of
HTTP, SQL or Celery, and imports no torch: a run's process scrubs what it reports before
its run's code is loaded (worker/rank_entry.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from urllib.parse import urlsplit

from grpo.spec.token_env import TOKEN_ENVS_SETTING

HIDDEN = "***"
MIN_SECRET_CHARS = 8
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSPHRASE|KEY|CREDENTIAL|AUTH", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*):[^\s/@]+@")
_BEARER = re.compile(r"(?P<head>\bBearer\s+)[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)


def scrub(text: str, env: Mapping[str, str] | None = None) -> str:
    """`text` with every secret of `env` (default this process's environment) hidden."""
    return hide(text, secret_values(os.environ if env is None else env))


def hide(text: str, secrets: Collection[str]) -> str:
    """`text` without URL passwords, bearer tokens and the given secret values."""
    text = _URL_PASSWORD.sub(rf"\g<head>:{HIDDEN}@", text)
    text = _BEARER.sub(rf"\g<head>{HIDDEN}", text)
    for value in sorted(secrets, key=len, reverse=True):  # a longer secret first
        text = text.replace(value, HIDDEN)
    return text


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The values in `env` that are secrets (long enough to be told from words)."""
    listed = {n.strip() for n in env.get(TOKEN_ENVS_SETTING, "").split(",") if n.strip()}
    found: set[str] = set()
    for name, value in env.items():
        if name == TOKEN_ENVS_SETTING:
            continue  # it names variables; their values are the secrets
        if (name in listed or _SECRET_NAME.search(name)) and not _is_path(value):
            found.update(_pieces(value))
        found.update(_url_passwords(value))
    return {v for v in found if len(v) >= MIN_SECRET_CHARS}


def _is_path(value: str) -> bool:
    """A file's path (SSH_AUTH_SOCK, a key file's): where a secret is, not the secret."""
    return os.path.isabs(value) and os.path.exists(value)


def _pieces(value: str) -> Iterable[str]:
    """The value, and the token of each `name:role:token` of a list (GRPO_API_TOKENS)."""
    yield value.strip()
    for item in value.split(","):
        yield item.rsplit(":", 1)[-1].strip()


def _url_passwords(value: str) -> Iterable[str]:
    if "://" not in value or "@" not in value:
        return
    for part in value.split(","):
        try:
            password = urlsplit(part.strip()).password
        except ValueError:
            continue
        if password:
            yield password
