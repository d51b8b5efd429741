"""`judge` rewards: an LLM judge over an OpenAI-compatible chat-completions endpoint.

Each completion is one request `{model, messages: [system?, user], temperature, max_tokens}`
to the entry's URL on an allowed host (GRPO_REWARD_HOSTS, checked before any request, as
for `http` rewards, whose retrying POST it shares), the user message being the rubric with
the completion's prompt, completion, answer and record columns filled in. The answer
`choices[0].message.content` is read as a score (the last number within `score_range`, or
the label named last) and kept, raw, beside it: the completion's `<label>.answer` column
(the notes' extras, stored with the completion and shown in the inspector). Requests run
`max_concurrency` at a time. A judge that fails a completion fails the step with a kind
(grpo/rewards/failure_kinds.py): timeout, unreachable (connection, 5xx), host_refused,
unparsable_judge_answer. Knows nothing of our server, SQL or Celery.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from grpo.failures import RewardFunctionError
from grpo.rewards.batch import Notes, RewardBatch
from grpo.rewards.failure_kinds import UnparsableJudgeAnswer
from grpo.rewards.http import check_endpoint, check_host, endpoint_headers, post_json
from grpo.rewards.kind import RewardKind, RunFacts, Scorer
from grpo.spec.rewards import RUBRIC_PLACE, JudgeReward

NUMBER = re.compile(r"(-?\d+(?:\.\d+)?)(?:\s*/\s*\d+(?:\.\d+)?)?")
"""A number, or the N of `N/M` (`7/10` scores 7)."""


def fill_rubric(rubric: str, values: Mapping[str, Any]) -> str:
    """The rubric with each `{name}` replaced by its value (`{{`, `}}`: literal braces);
    KeyError naming a placeholder the completion has no value for."""

    def place(match: re.Match[str]) -> str:
        piece, name = match.group(0), match.group(1)
        if piece in ("{{", "}}") or name is None:  # a lone brace: refused by the spec
            return piece[0]
        if name not in values:
            raise KeyError(f"the rubric's {{{name}}} names no record column: have {sorted(values)}")
        value = values[name]
        return value if isinstance(value, str) else str(value)

    return RUBRIC_PLACE.sub(place, rubric)


def parse_score(entry: JudgeReward, answer: str) -> float:
    """The score the judge's answer gives (see JudgeReward), or UnparsableJudgeAnswer."""
    if entry.labels is not None:
        found = [
            (m.start(), label)
            for label in entry.labels
            for m in re.finditer(rf"(?<!\w){re.escape(label.strip())}(?!\w)", answer, re.I)
        ]
        if not found:
            raise UnparsableJudgeAnswer(f"names none of the labels {sorted(entry.labels)}")
        return float(entry.labels[max(found)[1]])
    numbers = NUMBER.findall(answer)
    if not numbers:
        raise UnparsableJudgeAnswer("holds no number")
    score = float(numbers[-1])
    low, high = entry.score_range
    if not low <= score <= high:
        raise UnparsableJudgeAnswer(
            f"its score {score:g} is outside score_range [{low:g}, {high:g}]"
        )
    return score


def judge_messages(entry: JudgeReward, values: Mapping[str, Any]) -> list[dict[str, str]]:
    user = {"role": "user", "content": fill_rubric(entry.rubric, values)}
    return [{"role": "system", "content": entry.system}, user] if entry.system else [user]


def rubric_values(batch: RewardBatch) -> list[dict[str, Any]]:
    """Per completion: the record's columns, the prompt (text, or its messages' contents
    joined), the answer and the completion."""
    columns = batch.columns()
    values = []
    for i, completion in enumerate(batch.completions):
        prompt = batch.examples[i // batch.num_generations].prompt
        if isinstance(prompt, list):
            prompt = "\n".join(str(m.get("content", "")) for m in prompt)
        row = {name: column[i] for name, column in columns.items()}
        values.append({**row, "prompt": prompt, "completion": completion})
    return values


def ask_judge(client: httpx.Client, entry: JudgeReward, values: Mapping[str, Any]) -> str:
    """The judge's answer to one completion (its message content)."""
    payload = {
        "model": entry.model,
        "messages": judge_messages(entry, values),
        "temperature": entry.temperature,
        "max_tokens": entry.max_tokens,
    }
    body = post_json(client, entry, payload)
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise UnparsableJudgeAnswer(
            f"POST {entry.url}: HTTP 200 but no choices[0].message.content: {str(body)[:200]!r}"
        ) from None
    if not isinstance(content, str):
        raise UnparsableJudgeAnswer(f"POST {entry.url}: the answer's content is not text")
    return content


def judge_batch(
    entry: JudgeReward, batch: RewardBatch, notes: Notes, *, headers: dict[str, str]
) -> list[float | None]:
    """Every completion's score, its raw answer in the notes' `<label>.answer` column."""
    values = rubric_values(batch)

    def one(i: int) -> tuple[str | None, float]:
        answer = None
        try:
            answer = ask_judge(client, entry, values[i])
            return answer, parse_score(entry, answer)
        except UnparsableJudgeAnswer as exc:
            said = f"the judge's answer {exc}: {(answer or '')[:200]!r}" if answer else str(exc)
            raise RewardFunctionError(entry.label, i, UnparsableJudgeAnswer(said)) from exc
        except Exception as exc:  # noqa: BLE001 - named with its completion, kind kept
            raise RewardFunctionError(entry.label, i, exc) from exc

    with (
        httpx.Client(timeout=entry.timeout_s, headers=headers) as client,
        ThreadPoolExecutor(max_workers=entry.max_concurrency) as pool,
    ):
        judged = list(pool.map(one, range(len(batch.completions))))
    notes.extras[f"{entry.label}.answer"] = [answer for answer, _ in judged]
    return [score for _, score in judged]


def prepare_judge(entry: JudgeReward, run: RunFacts) -> Scorer:
    """Check host and token on this worker before step 1; each step asks the judge."""
    check_host(entry, run.reward_hosts)
    headers = endpoint_headers(entry, run.token_envs)

    def scorer(batch: RewardBatch, notes: Notes) -> list[float | None]:
        check_host(entry, run.reward_hosts)
        return judge_batch(entry, batch, notes, headers=headers)

    return scorer


JUDGE = RewardKind("judge", check_endpoint, prepare_judge)
