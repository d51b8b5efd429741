"""Rule-based reward functions, scored separately and combined by weight.

Each rule maps (completion text, reference answer, completion token count) to a float;
`score_completions` keeps every function's scores apart (keyed by label) for metrics and
inspection, and `total_rewards` is the weighted sum of the scores that apply (None, from a
programmable function, applies nothing; see scoring.py). User patterns run under the
`regex` module's timeout and answer checks are bounded (see answers.py): a hostile
completion scores 0 in bounded time. No user-supplied code runs. Knows nothing of models or tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import regex

from grpo.failures import RewardFunctionError
from grpo.rewards.answers import extract_answer, is_equal
from grpo.spec import (
    AccuracyReward,
    ExactMatchReward,
    FormatReward,
    LengthReward,
    RegexReward,
)

RuleReward = AccuracyReward | FormatReward | LengthReward | ExactMatchReward | RegexReward
"""The built-in rules: plain functions of one completion, no state, no I/O."""

REGEX_TIMEOUT_S = 0.05
"""Wall-clock budget of one pattern match against one completion."""


def score_completions(
    completions: Sequence[str],
    *,
    answers: Sequence[str],
    num_tokens: Sequence[int],
    rewards: Sequence[RuleReward],
) -> dict[str, list[float]]:
    """Unweighted scores of every completion, keyed by reward label.

    A function that raises becomes a RewardFunctionError naming it and the completion.
    """
    if not len(completions) == len(answers) == len(num_tokens):
        raise ValueError("completions, answers and num_tokens must have the same length")
    scores: dict[str, list[float]] = {}
    for spec in rewards:
        scores[spec.label] = []
        for i, (text, answer, n) in enumerate(zip(completions, answers, num_tokens, strict=True)):
            try:
                scores[spec.label].append(score(spec, text, answer, n))
            except Exception as exc:  # noqa: BLE001 - any failure is reported with its function
                raise RewardFunctionError(spec.label, i, exc) from exc
    return scores


def total_rewards(
    scores: Mapping[str, Sequence[float | None]], weights: Mapping[str, float]
) -> list[float]:
    """r_i = sum over the functions f that apply to o_i of weight_f * score_f(o_i).

    A None score (the function does not apply to that completion) adds nothing.
    """
    count = len(next(iter(scores.values()))) if scores else 0
    return [
        sum(weights[label] * s for label, column in scores.items() if (s := column[i]) is not None)
        for i in range(count)
    ]


def score(spec: RuleReward, completion: str, answer: str, num_tokens: int) -> float:
    """One function's score of one completion."""
    match spec:
        case AccuracyReward():
            return accuracy_reward(completion, answer, spec)
        case FormatReward():
            return float(_matches(spec.pattern, completion, full=True))
        case LengthReward():
            return length_penalty(
                num_tokens, max_length=spec.max_length, cache_length=spec.cache_length
            )
        case ExactMatchReward():
            return exact_match_reward(completion, answer, strip=spec.strip)
        case RegexReward():
            return float(_matches(spec.pattern, completion, full=False))
    raise ValueError(f"unknown reward function {spec!r}")


def accuracy_reward(completion: str, answer: str, spec: AccuracyReward) -> float:
    """1 when the extracted final answer equals the reference, else 0."""
    if not answer.strip():
        # every completion would score 0 and the run would look like it cannot learn
        raise ValueError("the reference answer is empty; accuracy needs one for every prompt")
    predicted = extract_answer(completion, spec.extract)
    return float(is_equal(predicted, answer, compare=spec.compare, tolerance=spec.tolerance))


def length_penalty(num_tokens: int, *, max_length: int, cache_length: int) -> float:
    """DAPO soft overlong punishment: 0 up to L_max - L_cache, linear to -1 at L_max, then -1."""
    free = max_length - cache_length
    if num_tokens <= free:
        return 0.0
    if num_tokens > max_length:
        return -1.0
    return (free - num_tokens) / cache_length


def exact_match_reward(completion: str, answer: str, *, strip: bool) -> float:
    """1 when the completion equals the reference answer."""
    if strip:
        return float(completion.strip() == answer.strip())
    return float(completion == answer)


def _matches(pattern: str, text: str, *, full: bool) -> bool:
    """Pattern match with dot matching newlines; a timeout counts as no match."""
    compiled = _compile(pattern)
    try:
        found = (
            compiled.fullmatch(text, timeout=REGEX_TIMEOUT_S)
            if full
            else compiled.search(text, timeout=REGEX_TIMEOUT_S)
        )
    except TimeoutError:
        return False
    return found is not None


@lru_cache(maxsize=64)
def _compile(pattern: str) -> regex.Pattern[str]:
    try:
        return regex.compile(pattern, flags=regex.DOTALL)
    except regex.error as exc:
        raise ValueError(f"reward pattern {pattern!r} is not a valid regex: {exc}") from exc
