"""Rule-based reward functions, scored separately and combined by weight.

Each rule maps (completion text, reference answer, completion token count) to a float;
`score_completions` keeps every function's scores apart (keyed by label) for metrics and
inspection, and `total_rewards` is the weighted sum of the scores that apply (None, from a
programmable function, applies nothing; see scoring.py). User patterns are compiled under a
size budget and matched under a timeout (patterns.py), answer checks are bounded (see
answers.py): a hostile completion or pattern scores 0, with a note, in bounded time and
memory. No user-supplied code runs. Knows nothing of models or tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from grpo.failures import RewardFunctionError
from grpo.rewards.answers import extract_answer, is_equal
from grpo.rewards.batch import RewardBatch
from grpo.rewards.kind import RewardKind, RunFacts, Scorer, no_server_check
from grpo.spec import (
    AccuracyReward,
    ExactMatchReward,
    FormatReward,
    LengthReward,
    RegexReward,
)
from grpo.spec.patterns import MATCH_TIMEOUT_S, PatternTooLarge, search_pattern

RuleReward = AccuracyReward | FormatReward | LengthReward | ExactMatchReward | RegexReward
"""The built-in rules: plain functions of one completion, no state, no I/O."""


def score_completions(
    completions: Sequence[str],
    *,
    answers: Sequence[str],
    num_tokens: Sequence[int],
    rewards: Sequence[RuleReward],
    notes: dict[int, str] | None = None,
) -> dict[str, list[float]]:
    """Unweighted scores of every completion, keyed by reward label; `notes` gets what a
    function said about a completion (a pattern that timed out), by completion index.

    A function that raises becomes a RewardFunctionError naming it and the completion.
    """
    if not len(completions) == len(answers) == len(num_tokens):
        raise ValueError("completions, answers and num_tokens must have the same length")
    scores: dict[str, list[float]] = {}
    for spec in rewards:
        scores[spec.label] = []
        for i, (text, answer, n) in enumerate(zip(completions, answers, num_tokens, strict=True)):
            try:
                value, note = scored(spec, text, answer, n)
            except Exception as exc:  # noqa: BLE001 - any failure is reported with its function
                raise RewardFunctionError(spec.label, i, exc) from exc
            scores[spec.label].append(value)
            if note is not None and notes is not None:
                notes[i] = note
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
    return scored(spec, completion, answer, num_tokens)[0]


def scored(
    spec: RuleReward, completion: str, answer: str, num_tokens: int
) -> tuple[float, str | None]:
    """One function's score of one completion, and a note when it was not what it seemed."""
    match spec:
        case FormatReward():
            return pattern_reward(spec.pattern, completion, full=True)
        case RegexReward():
            return pattern_reward(spec.pattern, completion, full=False)
    return rule_score(spec, completion, answer, num_tokens), None


def rule_score(spec: RuleReward, completion: str, answer: str, num_tokens: int) -> float:
    """The score of a rule with nothing to say beyond its number."""
    match spec:
        case AccuracyReward():
            return accuracy_reward(completion, answer, spec)
        case LengthReward():
            return length_penalty(
                num_tokens, max_length=spec.max_length, cache_length=spec.cache_length
            )
        case ExactMatchReward():
            return exact_match_reward(completion, answer, strip=spec.strip)
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


def pattern_reward(pattern: str, completion: str, *, full: bool) -> tuple[float, str | None]:
    """1 when the pattern matches (the whole completion when `full`), else 0; 0 with a note
    when the match ran out of time or the pattern is over the compile budget (a spec stored
    before the API checked it)."""
    try:
        found = search_pattern(pattern, completion, full=full)
    except PatternTooLarge as exc:
        return 0.0, f"pattern refused, scored 0: {exc}"
    if found is None:
        return 0.0, f"pattern match ran past {MATCH_TIMEOUT_S:g} s, scored 0"
    return float(found), None


def prepare_rule(entry: RuleReward, run: RunFacts) -> Scorer:
    """A rule needs nothing prepared: its scorer scores each completion on its own."""

    def scorer(batch: RewardBatch, notes: dict[int, str]) -> list[float | None]:
        scores = score_completions(
            batch.completions,
            answers=batch.per_completion([e.answer for e in batch.examples]),
            num_tokens=batch.num_tokens,
            rewards=(entry,),
            notes=notes,
        )
        return list(scores[entry.label])

    return scorer


ANSWER_RULES = (AccuracyReward, ExactMatchReward)
"""The rules that compare a completion with the reference answer."""
RULE_KINDS: tuple[RewardKind[Any], ...] = tuple(
    RewardKind(
        rule.model_fields["name"].default,
        no_server_check,
        prepare_rule,
        needs_answer=rule in ANSWER_RULES,
    )
    for rule in get_args(RuleReward)
)
"""The built-in rules as reward kinds: pydantic's checks are all a server applies."""
