"""Which Host and Origin the server answers to, and which body types a write may carry."""

from __future__ import annotations

import pytest

from app.api.guards import allowed_hosts, body_problem, host_name, is_same_or_allowed_origin
from app.settings import Settings


def test_loopback_bind_answers_to_its_own_and_loopback_names_only() -> None:
    hosts = allowed_hosts(Settings(host="127.0.0.1", allowed_hosts=""))
    assert hosts is not None
    assert {"127.0.0.1", "localhost", "::1"} <= hosts
    assert "evil.example" not in hosts


def test_listed_names_are_added_and_a_star_or_a_wildcard_bind_allows_any() -> None:
    hosts = allowed_hosts(Settings(host="127.0.0.1", allowed_hosts="grpo.lab, Box"))
    assert hosts is not None and {"grpo.lab", "box"} <= hosts
    assert allowed_hosts(Settings(host="127.0.0.1", allowed_hosts="*")) is None
    assert allowed_hosts(Settings(host="0.0.0.0", allowed_hosts="")) is None
    listed = allowed_hosts(Settings(host="0.0.0.0", allowed_hosts="grpo.lab"))
    assert listed is not None and "grpo.lab" in listed and "evil.example" not in listed


@pytest.mark.parametrize(
    ("header", "name"),
    [("example.org:8000", "example.org"), ("[::1]:8000", "::1"), ("LOCALHOST", "localhost")],
)
def test_host_names_drop_the_port(header: str, name: str) -> None:
    assert host_name(header) == name


def test_only_the_same_origin_or_a_listed_one_is_allowed() -> None:
    allowed = frozenset({"https://lab.example.org"})
    assert is_same_or_allowed_origin("http://127.0.0.1:8000", "127.0.0.1:8000", allowed)
    assert is_same_or_allowed_origin("https://lab.example.org/", "127.0.0.1:8000", allowed)
    assert not is_same_or_allowed_origin("http://127.0.0.1:9999", "127.0.0.1:8000", allowed)
    assert not is_same_or_allowed_origin("null", "127.0.0.1:8000", allowed)
    assert not is_same_or_allowed_origin("http://evil.example", "127.0.0.1:8000", allowed)


@pytest.mark.parametrize(
    ("path", "content_type", "is_ok"),
    [
        ("/api/runs", "application/json", True),
        ("/api/runs", "application/json; charset=utf-8", True),
        ("/api/runs", "application/merge-patch+json", True),
        ("/api/runs", "text/plain", False),
        ("/api/runs", "", False),
        ("/api/runs/x/clone", "application/x-www-form-urlencoded", False),
        ("/api/datasets", "application/x-ndjson", True),
        ("/api/datasets", "application/jsonl", True),
        ("/api/datasets", "text/plain", False),
        ("/api/datasets", "multipart/form-data; boundary=x", False),
    ],
)
def test_write_bodies_must_be_of_the_type_the_route_reads(
    path: str, content_type: str, is_ok: bool
) -> None:
    assert (body_problem(path, content_type) is None) == is_ok
