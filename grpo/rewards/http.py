"""`http` rewards: POST groups of completions to a scoring endpoint on an allowed host.

Request `{run_id, step, groups: [{index, prompt, answer, data, completions}]}`, answer
`{rewards: [[float | null, ...], ...]}` of the same shape. The host is checked against the
allowlist the worker was given (GRPO_REWARD_HOSTS) before any request, redirects are not
followed, the bearer token comes from the worker's environment variable the spec names,
if grpo.spec.token_env allows it.
Requests for different groups run concurrently (bounded); connection errors, timeouts and
5xx answers are retried with exponential backoff. Knows nothing of our server, SQL or Celery.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from grpo.failures import RewardFunctionError
from grpo.rewards.batch import RewardBatch
from grpo.rewards.failure_kinds import FailureKind, HostRefused
from grpo.rewards.kind import Refusal, RewardKind, RunFacts, Scorer, ServerFacts
from grpo.rewards.trl_call import checked_scores
from grpo.spec.endpoints import endpoint_host, endpoint_url_problem, is_allowed_host
from grpo.spec.rewards import EndpointReward, HttpReward
from grpo.spec.token_env import is_allowed_token_env, read_token, token_env_rule

BACKOFF_S = 0.5
"""First retry waits this long; each later one twice the one before."""


class EndpointError(RuntimeError):
    """The endpoint could not be used; the message names URL, status and what was wrong,
    `failure_kind` which way it failed (grpo/rewards/failure_kinds.py)."""

    def __init__(self, message: str, kind: FailureKind = "runtime_error") -> None:
        super().__init__(message)
        self.failure_kind = kind


def check_host(entry: EndpointReward, allowed_hosts: Sequence[str]) -> None:
    """Refuse (ValueError) a URL that breaks the spec's URL rule (a stored spec may predate
    it) or whose host the operator has not allowed."""
    if (problem := endpoint_url_problem(entry.url)) is not None:
        raise ValueError(f"reward {entry.label!r}: url: {problem}")
    if not is_allowed_host(entry.url, allowed_hosts):
        listed = ", ".join(allowed_hosts) or "none"
        raise HostRefused(
            f"reward {entry.label!r}: host {endpoint_host(entry.url)!r} of {entry.url} is not "
            f"in this worker's GRPO_REWARD_HOSTS (allowed: {listed})"
        )


def score_with_endpoint(
    entry: HttpReward,
    batch: RewardBatch,
    *,
    allowed_hosts: Sequence[str],
    token_envs: Sequence[str] = (),
) -> list[float | None]:
    """Every completion's score from the endpoint, in batch order (group-major).
    `token_envs`: the operator's GRPO_REWARD_TOKEN_ENVS (see grpo/spec/token_env.py)."""
    check_host(entry, allowed_hosts)
    n = len(batch.examples)
    chunks = [
        range(i, min(i + entry.groups_per_request, n))
        for i in range(0, n, entry.groups_per_request)
    ]
    headers = endpoint_headers(entry, token_envs)
    with (
        httpx.Client(timeout=entry.timeout_s, headers=headers) as client,
        ThreadPoolExecutor(max_workers=min(entry.max_concurrency, len(chunks))) as pool,
    ):
        answers = list(pool.map(lambda groups: _score_groups(client, entry, batch, groups), chunks))
    return [score for answer in answers for score in answer]


def endpoint_headers(entry: EndpointReward, token_envs: Sequence[str]) -> dict[str, str]:
    """The bearer header, when the spec names a token variable this worker offers."""
    if entry.token_env is None:
        return {}
    try:
        token = read_token(entry.token_env, token_envs)
    except ValueError as exc:
        raise ValueError(f"reward {entry.label!r}: {exc}") from None
    return {"Authorization": f"Bearer {token}"}


def _score_groups(
    client: httpx.Client, entry: HttpReward, batch: RewardBatch, groups: range
) -> list[float | None]:
    g = batch.num_generations
    payload = {
        "run_id": batch.run_id,
        "step": batch.step,
        "groups": [
            {
                "index": b,
                "prompt": batch.examples[b].prompt,
                "answer": batch.examples[b].answer,
                "data": batch.examples[b].data,
                "completions": list(batch.completions[b * g : (b + 1) * g]),
            }
            for b in groups
        ],
    }
    try:
        body = post_json(client, entry, payload)
        return _rewards(body, groups=len(groups), per_group=g)
    except (EndpointError, ValueError) as exc:
        # index: the first completion of the first group of this request, to name its prompt
        cause = (
            exc
            if isinstance(exc, EndpointError)
            else EndpointError(f"POST {entry.url}: {exc}", "bad_return_value")
        )
        raise RewardFunctionError(entry.label, groups.start * g, cause) from exc


def post_json(client: httpx.Client, entry: EndpointReward, payload: dict[str, Any]) -> Any:
    """The JSON answer of a 2xx, after up to max_retries retries of errors and 5xx (the
    `judge` kind's requests too); EndpointError with its failure kind otherwise."""
    attempts = entry.max_retries + 1
    kind: FailureKind = "unreachable"
    for attempt in range(attempts):
        if attempt:
            time.sleep(BACKOFF_S * 2 ** (attempt - 1))
        try:
            response = client.post(entry.url, json=payload)
        except httpx.TimeoutException:
            problem = f"no answer within timeout_s={entry.timeout_s:g} s (no HTTP status)"
            kind = "timeout"
            continue
        except httpx.TransportError as exc:
            problem = f"connection failed (no HTTP status): {type(exc).__name__}: {exc}"
            kind = "unreachable"
            continue
        if response.status_code >= 500:
            problem = f"HTTP {response.status_code}: {response.text[:200]!r}"
            kind = "unreachable"
            continue
        if not response.is_success:
            raise EndpointError(
                f"POST {entry.url}: HTTP {response.status_code} (not retried): "
                f"{response.text[:200]!r}"
            )
        try:
            return response.json()
        except json.JSONDecodeError as exc:
            raise EndpointError(
                f"POST {entry.url}: HTTP {response.status_code} but the body is not JSON "
                f"({exc.msg}): {response.text[:200]!r}",
                "bad_return_value",
            ) from exc
    raise EndpointError(f"POST {entry.url}: {problem} after {attempts} attempt(s)", kind)


def _rewards(body: Any, *, groups: int, per_group: int) -> list[float | None]:
    """`body["rewards"]` flattened, after checking it is groups x per_group numbers or null."""
    rows = body.get("rewards") if isinstance(body, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"HTTP 200 but the answer has no list `rewards`: {str(body)[:200]!r}")
    if len(rows) != groups:
        raise ValueError(f"HTTP 200 but `rewards` has {len(rows)} rows for {groups} groups")
    scores: list[float | None] = []
    for b, row in enumerate(rows):
        try:
            scores.extend(checked_scores(row, expected=per_group))
        except ValueError as exc:
            raise ValueError(f"HTTP 200 but rewards[{b}] {exc}") from exc
    return scores


def check_endpoint(entry: EndpointReward, server: ServerFacts) -> Refusal | None:
    """The URL must follow the URL rule and name a host this server allows, the token
    variable must be one the rule allows."""
    if (problem := endpoint_url_problem(entry.url)) is not None:
        return Refusal("url", problem)
    if not is_allowed_host(entry.url, server.reward_hosts):
        allowed = ", ".join(server.reward_hosts) or "none (GRPO_REWARD_HOSTS)"
        return Refusal(
            "url",
            f"host {endpoint_host(entry.url)!r} is not an allowed reward host; allowed: {allowed}",
        )
    if entry.token_env is not None and not is_allowed_token_env(entry.token_env, server.token_envs):
        rule = token_env_rule(server.token_envs)
        return Refusal("token_env", f"{entry.token_env!r} may not be used: {rule}")
    return None


def prepare_endpoint(entry: HttpReward, run: RunFacts) -> Scorer:
    """Check host and token on this worker before step 1; each step POSTs the batch."""
    check_host(entry, run.reward_hosts)
    endpoint_headers(entry, run.token_envs)

    def scorer(batch: RewardBatch, notes: dict[int, str]) -> list[float | None]:
        return score_with_endpoint(
            entry, batch, allowed_hosts=run.reward_hosts, token_envs=run.token_envs
        )

    return scorer


HTTP = RewardKind("http", check_endpoint, prepare_endpoint)
