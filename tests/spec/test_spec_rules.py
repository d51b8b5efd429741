"""The rules every spec field of a kind follows (issue 38): one URL rule for every endpoint
URL (grpo/spec/endpoints.py), one depth and size rule for free-form JSON
(grpo/spec/json_values.py), integers that take numbers only, each with an upper bound; and
the worker's own checks refusing the same URLs and JSON in entries pydantic never saw (a
stored spec older than the rules, read without validation)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from grpo.rewards.http import check_endpoint as check_reward_endpoint
from grpo.rewards.http import check_host, prepare_endpoint
from grpo.rewards.kind import RunFacts, ServerFacts
from grpo.spec import JobSpec
from grpo.spec.endpoints import Endpoint, endpoint_host, is_allowed_host, parse_endpoint
from grpo.spec.json_values import JSON_MAX_DEPTH, json_value_problem
from grpo.spec.rewards import HttpReward
from grpo.spec.tools import HttpTool
from grpo.tools.http import check_endpoint as check_tool_endpoint
from grpo.tools.http import prepare_endpoint as prepare_tool
from grpo.tools.kind import ToolRunFacts, ToolServerFacts

HOST = "127.0.0.1:18999"
BAD_URLS = {
    "http://127.0.0.1:+18999/x": "malformed port",
    "http://127.0.0.1:18999:80/x": "malformed port",
    "http://127.0.0.1:\uff11\uff18\uff19\uff19\uff19/x": "malformed port",  # full-width digits
    "http://127.0.0.1:-1/x": "malformed port",
    "http://127.0.0.1:65536/x": "malformed port",
    "http://127.0.0.1:018999/x": "malformed port",
    "http://127.0.0.1:0/x": "malformed port",
    "http://127.0.0.1:/x": "malformed port",
    "http://[127.0.0.1]/x": "not an IPv6 address",
    "http://[127.0.0.1]:18999/x": "not an IPv6 address",
    "http://[fe80::1%25eth0]:18999/x": "not an IPv6 address",
    "http://[::1/x": "malformed IPv6 host",
    "http://127.0.0.1%40evil.example:18999/x": "malformed host",
    "http://evil%40127.0.0.1:18999/x": "malformed host",
    "http://127.0.0.1:18999%40evil.example/x": "malformed port",
    "http://user@127.0.0.1:18999/x": "user info",
    "http://127.1:18999/x": "not a dotted-quad",
    "http://2130706433:18999/x": "not a dotted-quad",
    "http://0x7f000001:18999/x": "not a dotted-quad",
    "http://127.0.0.1.:18999/x": "not a dotted-quad",
    "http://\uff11\uff12\uff17.0.0.1:18999/x": "malformed host",
    "http://b\u00fccher.example/x": "malformed host",
    "http://:18999/x": "no host",
    "ftp://127.0.0.1/x": "not an http(s) URL",
    "http://127.0.0.1/a b": "not an http(s) URL",
}
GOOD_URLS = {
    "http://127.0.0.1:18999/x": Endpoint("http", "127.0.0.1", 18999),
    "https://Judge.Example/score?q=1": Endpoint("https", "judge.example", None),
    "http://judge.example.:8080": Endpoint("http", "judge.example.", 8080),
    "http://xn--bcher-kva.example/x": Endpoint("http", "xn--bcher-kva.example", None),
    "http://my_service:65535/": Endpoint("http", "my_service", 65535),
    "http://[::1]:18999/x": Endpoint("http", "::1", 18999),
    "http://[2001:db8::7]/x": Endpoint("http", "2001:db8::7", None),
}


@pytest.mark.parametrize(("url", "words"), BAD_URLS.items())
def test_a_url_that_breaks_the_rule_is_refused_saying_why(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_endpoint(url)
    assert not is_allowed_host(url, [HOST, "127.0.0.1", "::1"])


@pytest.mark.parametrize(("url", "parts"), GOOD_URLS.items())
def test_a_url_within_the_rule_parses_into_what_the_lists_compare(url: str, parts: Any) -> None:
    assert parse_endpoint(url) == parts
    assert endpoint_host(url) == (f"{parts.host}:{parts.port}" if parts.port else parts.host)


def http_tool(url: str, **fields: Any) -> dict[str, Any]:
    return {"name": "http", "label": "t", "url": url, "description": "d", **fields}


@pytest.mark.parametrize("url", BAD_URLS)
def test_every_url_field_of_a_spec_follows_the_one_rule(url: str) -> None:
    """The same refusal, naming the field, for a reward's url and a tool's (and eval's)."""
    specs: dict[tuple[Any, ...], dict[str, Any]] = {
        ("rewards", 0, "http", "url"): {"rewards": [{"name": "http", "url": url}]},
        ("tools", 0, "http", "url"): {"tools": [http_tool(url)]},
        ("eval", "rewards", 0, "http", "url"): {
            "eval": {"rewards": [{"name": "http", "url": url}]}
        },
    }
    for loc, fields in specs.items():
        with pytest.raises(ValidationError) as refused:
            JobSpec.model_validate({"model": "builtin:tiny-tools", **fields})
        assert [e["loc"] for e in refused.value.errors()] == [loc]


def stored_reward(url: str) -> HttpReward:
    """An entry as a stored spec read without validation could hold it."""
    return HttpReward.model_construct(url=url, label="judge")


def stored_tool(url: str = f"http://{HOST}/x", parameters: Any = None) -> HttpTool:
    params = {"type": "object"} if parameters is None else parameters
    return HttpTool.model_construct(url=url, label="t", description="d", parameters=params)


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_worker_refuses_the_same_urls_before_any_request(url: str, tmp_path: Path) -> None:
    """Allowed hosts list the URL's own host: only the URL rule can refuse it."""
    reward, tool = stored_reward(url), stored_tool(url)
    hosts = (HOST, "127.0.0.1", endpoint_host(url))
    with pytest.raises(ValueError, match=r"reward 'judge': url: "):
        check_host(reward, hosts)
    with pytest.raises(ValueError, match=r"reward 'judge': url: "):
        prepare_endpoint(reward, RunFacts(cache_dir=tmp_path, reward_hosts=hosts))
    with pytest.raises(ValueError, match=r"tool 't': url: "):
        prepare_tool(tool, ToolRunFacts(tool_hosts=hosts))
    assert check_reward_endpoint(reward, ServerFacts(reward_hosts=hosts)).field == "url"  # type: ignore[union-attr]
    assert check_tool_endpoint(tool, ToolServerFacts(tool_hosts=hosts)).field == "url"  # type: ignore[union-attr]


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("levels", [JSON_MAX_DEPTH + 1, 250, 300, 500, 5000])
def test_json_deeper_than_the_bound_is_refused_at_any_depth(levels: int) -> None:
    deep = nested(levels)
    assert "deeper than 32 levels" in str(json_value_problem(deep))  # no RecursionError
    assert "deeper than 32 levels" in str(json_value_problem([[deep]]))
    tool = http_tool(f"http://{HOST}/x", parameters=deep)
    with pytest.raises(ValidationError) as refused:
        JobSpec(model="builtin:tiny-tools", tools=[tool])
    assert [e["loc"] for e in refused.value.errors()] == [("tools", 0, "http", "parameters")]
    with pytest.raises(ValueError, match="tool 't': parameters: nested deeper"):
        prepare_tool(stored_tool(parameters=deep), ToolRunFacts(tool_hosts=(HOST,)))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"description": "x" * 100_000}, "over the limit of 100000"),
        ({"a": float("nan")}, "not a JSON number"),
        ({"a": float("inf")}, "not a JSON number"),
        ({"a": {1, 2}}, "a set is not a JSON value"),
        ({"a": {1: "b"}}, "keys must be strings"),
        ({"a": b"x"}, "a bytes is not a JSON value"),
    ],
)
def test_json_that_is_too_large_or_not_json_is_refused(value: Any, words: str) -> None:
    assert words in str(json_value_problem(value))


def test_json_within_the_bounds_is_kept_as_given() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "x": nested(30)}
    assert json_value_problem(nested(JSON_MAX_DEPTH)) is None
    assert json_value_problem({"a": [1, 2.5, True, None, "s", (3, 4)]}) is None
    tool = http_tool(f"http://{HOST}/x", parameters=schema)
    spec = JobSpec(model="builtin:tiny-tools", tools=[tool])
    assert spec.tools[0].parameters == schema  # type: ignore[union-attr]


def integer_fields(schema: dict[str, Any], path: str = "") -> dict[str, dict[str, Any]]:
    """Every integer property of the JSON schema, by dotted path ($defs by name)."""
    found = {}
    for name, prop in schema.get("properties", {}).items():
        for each in prop.get("anyOf", [prop]):
            if each.get("type") == "integer":
                found[f"{path}{name}"] = each
    for definition, node in schema.get("$defs", {}).items():
        found |= integer_fields(node, f"{definition}.")
    return found


def test_every_integer_field_has_an_upper_bound() -> None:
    fields = integer_fields(JobSpec.model_json_schema())
    assert {"top_k", "warmup_steps", "save_steps", "kl_horizon", "ref_model_sync_steps"} <= set(
        fields
    )
    assert not [path for path, prop in fields.items() if "maximum" not in prop]


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"max_steps": True}, ("max_steps",)),
        ({"max_steps": "2"}, ("max_steps",)),
        ({"seed": False}, ("seed",)),
        ({"micro_batch_size": "8"}, ("micro_batch_size",)),
        ({"lora": {"r": True}}, ("lora", "r")),
        ({"rewards": [{"name": "http", "url": f"http://{HOST}/s", "max_retries": "1"}]},
         ("rewards", 0, "http", "max_retries")),
        ({"eval": {"every_steps": True}}, ("eval", "every_steps")),
    ],
)  # fmt: skip
def test_integer_fields_take_numbers_only(fields: dict[str, Any], loc: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate(fields)
    [error] = refused.value.errors()
    assert error["loc"] == loc and "Input should be an integer" in error["msg"]


def test_yaml_and_whole_floats_still_load() -> None:
    """YAML gives ints for ints; a float without a fraction is an integer to JSON Schema."""
    spec = JobSpec.model_validate(yaml.safe_load("max_steps: 3\nlora: {r: 4}\nsave_steps: 2.0\n"))
    assert (spec.max_steps, spec.lora.r, spec.save_steps) == (3, 4, 2)  # type: ignore[union-attr]
    with pytest.raises(ValidationError):
        JobSpec(save_steps=2.5)


def test_eval_source_is_checked_as_data_source_is() -> None:
    cases = {
        ("data", "source"): {"data": {"source": "builtin:../x"}},
        ("eval", "source"): {"eval": {"source": "builtin:../x"}},
    }
    for loc, fields in cases.items():
        with pytest.raises(ValidationError) as refused:
            JobSpec.model_validate(fields)
        [error] = refused.value.errors()
        assert error["loc"] == loc and "unknown built-in task" in error["msg"]
    assert JobSpec.model_validate({"eval": {"source": "builtin:arith"}}).eval is not None
