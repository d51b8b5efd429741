"""Endpoint URLs of a JobSpec: the one rule every URL a spec carries follows (`http`
rewards, `http` tools, the vLLM server of server mode, judges to come), and the host it
names as the operator's allow-lists (GRPO_REWARD_HOSTS, GRPO_TOOL_HOSTS,
GRPO_VLLM_SERVER_HOSTS) are compared with it.

A URL is `http[s]://host[:port][/path]`, where the host is an ASCII DNS name, a dotted-quad
IPv4 address or an IPv6 address in brackets, and the port 1 to 5 ASCII digits without a
leading zero, 1-65535. No user info, no percent escapes, no second colon, no Unicode that
IDNA would fold onto another name, no `127.1`-style IPv4 shorthand: the text an allow-list
compares is the address a request goes to. pydantic applies the rule at submit (the
`EndpointUrl` type of every URL field) and the worker again before any request
(`check_endpoint_url`). Standard library and pydantic only; knows nothing of HTTP clients.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, Field

URL_PATTERN = r"^https?://[^\s/?#@]+(/\S*)?$"
"""The shape JSON Schema states (the OpenAPI document and the reference show it); the
rest of the rule is `endpoint_url_problem`."""
_URL = re.compile(r"(https?)://([^/?#]*)(.*)", re.DOTALL)
_PORT = re.compile(r"[1-9][0-9]{0,4}", re.ASCII)
_DNS_NAME = re.compile(r"(?:[A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}\.?", re.ASCII)
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9A-Fa-f]*", re.ASCII)
"""A last label resolvers read as a number (inet_aton): the host must then be a dotted quad."""
HOST_RULE = (
    "write http[s]://host[:port][/path]: the host an ASCII name (xn-- for an internationalized "
    "one), a dotted-quad IPv4 address or an IPv6 address in brackets, the port 1-65535 in "
    "ASCII digits without a leading zero"
)


@dataclass(frozen=True)
class Endpoint:
    """The parts of a URL the rule accepted."""

    scheme: str
    host: str
    """Lower-case; an IPv6 address without its brackets."""
    port: int | None
    """None: the scheme's default port (the URL names none)."""

    @property
    def host_port(self) -> str:
        """`host[:port]`, as allow-lists name hosts."""
        return f"{self.host}:{self.port}" if self.port else self.host


def parse_endpoint(url: str) -> Endpoint:
    """The URL's scheme, host and port; ValueError saying what breaks the rule."""
    found = _URL.fullmatch(url)
    if found is None or any(c.isspace() for c in url):
        raise ValueError(f"{url[:100]!r} is not an http(s) URL: {HOST_RULE}")
    scheme, netloc, _ = found.groups()
    if "@" in netloc:
        raise ValueError(f"user info (`name@`) in {netloc!r} is not allowed: {HOST_RULE}")
    if netloc.startswith("["):
        host, port = _bracketed(netloc)
    else:
        host, colon, port_text = netloc.partition(":")
        port = _port(port_text, netloc) if colon else None
        _check_host(host, netloc)
    return Endpoint(scheme, host.lower(), port)


def _bracketed(netloc: str) -> tuple[str, int | None]:
    found = re.fullmatch(r"\[([^\]]*)\](?::(.*))?", netloc, re.DOTALL)
    if found is None:
        raise ValueError(f"malformed IPv6 host in {netloc!r}: {HOST_RULE}")
    host, port_text = found.groups()
    try:
        if "%" in host:  # a zone id names an interface of the worker, not a host
            raise ValueError
        ipaddress.IPv6Address(host)
    except ValueError:
        raise ValueError(
            f"{host!r} in brackets is not an IPv6 address (an IPv4 address goes without "
            f"brackets): {HOST_RULE}"
        ) from None
    return host, None if port_text is None else _port(port_text, netloc)


def _port(text: str, netloc: str) -> int:
    if not _PORT.fullmatch(text) or int(text) > 65535:
        raise ValueError(f"malformed port {text!r} in {netloc!r}: {HOST_RULE}")
    return int(text)


def _check_host(host: str, netloc: str) -> None:
    if not host:
        raise ValueError(f"no host in {netloc!r}: {HOST_RULE}")
    if len(host) > 253 or not _DNS_NAME.fullmatch(host):
        raise ValueError(f"malformed host {host!r} in {netloc!r}: {HOST_RULE}")
    if _NUMERIC_LABEL.fullmatch(host.rstrip(".").rsplit(".", 1)[-1]):
        try:
            if host.endswith("."):
                raise ValueError
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(
                f"{host!r} reads as a number but is not a dotted-quad IPv4 address "
                f"(as 127.0.0.1): {HOST_RULE}"
            ) from None


def endpoint_url_problem(url: str) -> str | None:
    """Why `url` breaks the endpoint rule; None when it follows it."""
    try:
        parse_endpoint(url)
    except ValueError as exc:
        return str(exc)
    return None


def check_endpoint_url(url: str) -> str:
    """The URL, once it follows the rule (ValueError otherwise): pydantic's validator of
    every URL field, and the worker's check before it calls out."""
    parse_endpoint(url)
    return url


EndpointUrl = Annotated[
    str, Field(max_length=2000, pattern=URL_PATTERN), AfterValidator(check_endpoint_url)
]
"""The type of every URL field of a spec."""


def url_host(host: str) -> str:
    """`host` as a URL names it: an IPv6 address bracketed (`::1` -> `[::1]`), others as given."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def endpoint_host(url: str) -> str:
    """`host[:port]` of a URL, lower-case, as GRPO_REWARD_HOSTS lists hosts; for a URL that
    breaks the rule, the text between `//` and the path (for messages: no list matches it)."""
    try:
        return parse_endpoint(url).host_port
    except ValueError:
        return url.partition("//")[2].split("/", 1)[0][:200].lower()


def host_entries(text: str) -> list[str]:
    """The entries of a GRPO_*_HOSTS setting: comma-separated `host[:port]`s, blanks
    dropped, lower-case, as `is_allowed_host` compares them."""
    return [h.strip().lower() for h in text.split(",") if h.strip()]


def is_allowed_host(url: str, allowed: Sequence[str]) -> bool:
    """An entry `host` allows every port of host; `host:port` only that port. A URL that
    breaks the rule is allowed by no list."""
    try:
        endpoint = parse_endpoint(url)
    except ValueError:
        return False
    entries = {a.strip().lower() for a in allowed if a.strip()}
    return endpoint.host_port in entries or endpoint.host in entries
