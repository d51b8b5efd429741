"""`http` tools: POST {run_id, name, arguments} to an endpoint on an allowed host and read
{result}. The host is checked against GRPO_TOOL_HOSTS (else GRPO_REWARD_HOSTS) at submit
and again on the worker; redirects are not followed; the bearer token is a worker variable
the token rule allows (grpo/spec/token_env.py); connection errors, timeouts and 5xx are
retried with exponential backoff. Every failure is the tool's error message to the model.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from grpo.spec.endpoints import endpoint_host, endpoint_url_problem, is_allowed_host
from grpo.spec.json_values import json_value_problem
from grpo.spec.token_env import is_allowed_token_env, read_token, token_env_rule
from grpo.spec.tools import HttpTool
from grpo.tools.kind import Prepared, Refusal, Tool, ToolKind, ToolRunFacts, ToolServerFacts

BACKOFF_S = 0.25


def post_call(
    entry: HttpTool, run_id: str, arguments: dict[str, Any], headers: dict[str, str]
) -> str:
    """The endpoint's `result`; RuntimeError with what went wrong after the retries."""
    payload = {"run_id": run_id, "name": entry.label, "arguments": arguments}
    problem = ""
    for attempt in range(entry.max_retries + 1):
        if attempt:
            time.sleep(BACKOFF_S * 2 ** (attempt - 1))
        try:
            response = httpx.post(entry.url, json=payload, headers=headers, timeout=entry.timeout_s)
        except httpx.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}"
            continue
        if response.status_code >= 500:
            problem = f"HTTP {response.status_code}"
            continue
        if not response.is_success:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
        body = response.json()
        if not isinstance(body, dict) or "result" not in body:
            raise RuntimeError(f"the tool endpoint answered without `result`: {str(body)[:200]}")
        return str(body["result"])
    raise RuntimeError(f"tool endpoint unavailable: {problem}")


def check_endpoint(entry: HttpTool, server: ToolServerFacts) -> Refusal | None:
    """The URL must follow the URL rule and name a host this server allows, `parameters`
    be JSON within the JSON rule, the token variable one the rule allows; pydantic checked
    the first two at submit, and the worker checks them again (a stored spec may predate
    either rule)."""
    if (problem := endpoint_url_problem(entry.url)) is not None:
        return Refusal("url", problem)
    if (problem := json_value_problem(entry.parameters)) is not None:
        return Refusal("parameters", problem)
    if not is_allowed_host(entry.url, server.tool_hosts):
        allowed = ", ".join(server.tool_hosts) or "none (GRPO_TOOL_HOSTS, GRPO_REWARD_HOSTS)"
        return Refusal(
            "url",
            f"host {endpoint_host(entry.url)!r} is not an allowed tool host; allowed: {allowed}",
        )
    if entry.token_env is not None and not is_allowed_token_env(entry.token_env, server.token_envs):
        return Refusal(
            "token_env", f"{entry.token_env!r} may not be used: {token_env_rule(server.token_envs)}"
        )
    return None


def prepare_endpoint(entry: HttpTool, run: ToolRunFacts) -> Prepared:
    """Check host and token on this worker before step 1."""
    refusal = check_endpoint(entry, ToolServerFacts(run.tool_hosts, run.token_envs))
    if refusal is not None:
        raise ValueError(f"tool {entry.label!r}: {refusal.field}: {refusal.message}")
    headers = {}
    if entry.token_env is not None:
        headers["Authorization"] = f"Bearer {read_token(entry.token_env, run.token_envs)}"
    schema = {
        "type": "function",
        "function": {"name": entry.label, "description": entry.description,
                     "parameters": entry.parameters},
    }  # fmt: skip
    call = lambda arguments, env: post_call(entry, run.run_id, arguments, headers)  # noqa: E731
    return Prepared([Tool(entry.label, schema, call)])


HTTP_TOOL = ToolKind("http", check_endpoint, prepare_endpoint)
