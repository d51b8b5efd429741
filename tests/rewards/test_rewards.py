"""Reward functions as tables, weighted totals, bounded time on hostile input
(grpo/rewards/rules.py)."""

import pytest

from grpo.failures import RewardFunctionError
from grpo.rewards.answers import extract_answer
from grpo.rewards.rules import length_penalty, score, score_completions, total_rewards
from grpo.spec import AccuracyReward, ExactMatchReward, FormatReward, LengthReward, RegexReward

ACCURACY_CASES = [
    # (completion, answer, extract, compare, expected)
    ("<think>6*7</think> <answer>42</answer>", "42", "auto", "numeric", 1.0),
    ("<answer>41</answer> but 42", "42", "auto", "numeric", 0.0),
    ("so the result is \\boxed{3/4}.", "0.75", "auto", "numeric", 1.0),
    ("23+45=68", "68", "auto", "numeric", 1.0),
    ("68.0", "68", "auto", "numeric", 1.0),
    ("it is 1,234 exactly", "1234", "auto", "numeric", 1.0),
    ("-22", "-22", "auto", "numeric", 1.0),
    ("67", "68", "auto", "numeric", 0.0),
    ("no number here", "68", "auto", "numeric", 0.0),
    ("", "68", "auto", "numeric", 0.0),
    ("<answer>5</answer> then 7", "7", "last_number", "numeric", 1.0),
    ("<answer>5</answer> then 7", "5", "answer_tag", "numeric", 1.0),
    ("\\boxed{\\frac{1}{2}}", "0.5", "auto", "symbolic", 1.0),
    ("<answer>x + x</answer>", "2x", "auto", "symbolic", 1.0),
    ("<answer>sqrt(8)</answer>", "2*sqrt(2)", "auto", "symbolic", 1.0),
    ("<answer>x + 1</answer>", "2x", "auto", "symbolic", 0.0),
    ("<answer>__import__('os')</answer>", "0", "auto", "symbolic", 0.0),
    ("<answer> Paris. </answer>", "paris", "auto", "string", 1.0),
    ("<answer>Lyon</answer>", "Paris", "auto", "string", 0.0),
]


@pytest.mark.parametrize(("completion", "answer", "extract", "compare", "expected"), ACCURACY_CASES)
def test_accuracy(completion, answer, extract, compare, expected):
    spec = AccuracyReward(extract=extract, compare=compare)
    assert score(spec, completion, answer, 10) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think><answer>1</answer>", "1"),
        ("\\boxed{\\frac{1}{2}} and \\boxed{7}", "7"),
        ("\\boxed{a{b}c}", "a{b}c"),
        ("<answer>unclosed 3", "unclosed 3"),
        ("x = 3.5, y = 12", "12"),
        ("nothing", None),
    ],
)
def test_extract_answer_prefers_tag_then_boxed_then_last_number(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("<think>add</think> <answer>68</answer>", 1.0),
        ("<think>line 1\nline 2</think>\n<answer>68</answer>", 1.0),
        ("<think>add</think>", 0.0),
        ("68", 0.0),
        ("<answer>68</answer><think>x</think>", 0.0),
    ],
)
def test_format_default_pattern_fullmatches_think_then_answer(completion, expected):
    assert score(FormatReward(), completion, "68", 5) == expected


@pytest.mark.parametrize(
    ("num_tokens", "expected"),
    [(10, 0.0), (48, 0.0), (52, -0.25), (56, -0.5), (64, -1.0), (65, -1.0)],
)
def test_length_penalty_ramps_linearly_over_the_cache_window(num_tokens, expected):
    # max 64, cache 16: free up to 48, then (48 - L) / 16, -1 past 64 (DAPO)
    assert length_penalty(num_tokens, max_length=64, cache_length=16) == pytest.approx(expected)
    assert score(
        LengthReward(max_length=64, cache_length=16), "x", "", num_tokens
    ) == pytest.approx(expected)


def test_length_penalty_without_cache_is_a_step():
    assert length_penalty(8, max_length=8, cache_length=0) == 0.0
    assert length_penalty(9, max_length=8, cache_length=0) == -1.0


@pytest.mark.parametrize(
    ("completion", "answer", "strip", "expected"),
    [
        (" 42\n", "42", True, 1.0),
        (" 42\n", "42", False, 0.0),
        ("42", "42", False, 1.0),
        ("43", "42", True, 0.0),
    ],
)
def test_exact_match(completion, answer, strip, expected):
    assert score(ExactMatchReward(strip=strip), completion, answer, 3) == expected


@pytest.mark.parametrize(
    ("pattern", "completion", "expected"),
    [
        (r"\d+", "abc 12", 1.0),
        (r"\d+", "abc", 0.0),
        (r"a.b", "a\nb", 1.0),
        (r"^step", "one step", 0.0),
    ],
)
def test_regex_searches_anywhere_with_dot_matching_newline(pattern, completion, expected):
    assert score(RegexReward(pattern=pattern), completion, "", 3) == expected


def test_scores_are_kept_per_function_and_summed_by_weight():
    rewards = (AccuracyReward(weight=2.0), FormatReward(weight=0.5))
    completions = ["<think>t</think><answer>3</answer>", "3", "<think>t</think><answer>4</answer>"]
    scores = score_completions(
        completions, answers=["3", "3", "3"], num_tokens=[9, 1, 9], rewards=rewards
    )
    assert scores == {"accuracy": [1.0, 1.0, 0.0], "format": [1.0, 0.0, 1.0]}
    assert total_rewards(scores, {"accuracy": 2.0, "format": 0.5}) == [2.5, 2.0, 0.5]


def test_a_null_score_adds_nothing_to_the_total():
    # judge applies to completions 0 and 2 only: 2*1 + 0.5*0.4 = 2.2; 2*0 = 0; 2*1 + 0.5*(-1) = 1.5
    scores = {"accuracy": [1.0, 0.0, 1.0], "judge": [0.4, None, -1.0]}
    totals = total_rewards(scores, {"accuracy": 2.0, "judge": 0.5})
    assert totals == pytest.approx([2.2, 0.0, 1.5])


def test_two_entries_of_one_kind_are_scored_apart_by_label():
    rewards = (RegexReward(pattern="a", label="has_a"), RegexReward(pattern="b", label="has_b"))
    scores = score_completions(["ab", "a"], answers=["", ""], num_tokens=[2, 1], rewards=rewards)
    assert scores == {"has_a": [1.0, 1.0], "has_b": [1.0, 0.0]}


def test_score_completions_checks_lengths():
    with pytest.raises(ValueError, match="same length"):
        score_completions(["a"], answers=[], num_tokens=[1], rewards=(AccuracyReward(),))


HANG_S = 15
"""A hostile completion that is not cut off scores for minutes or forever; each scores in
under 0.4 s here, cut at SYMPY_TIMEOUT_S (1 s) or MATCH_TIMEOUT_S at worst, so 15 s only
fails a hang, never a slow machine."""


@pytest.mark.parametrize(
    ("spec", "completion"),
    [
        (RegexReward(pattern=r"^(\w+\s?)*$"), "a" * 5000 + "!"),
        (FormatReward(pattern=r"(x+x+)+y"), "x" * 5000),
        (AccuracyReward(compare="symbolic"), "<answer>9**9**9**9</answer>"),
        (AccuracyReward(compare="symbolic"), "<answer>" + "(" * 90 + "x" + ")" * 90 + "</answer>"),
        (AccuracyReward(), "1 " * 200_000),
        (AccuracyReward(), "<answer>1e999999999</answer>"),
        (AccuracyReward(compare="symbolic"), "<answer>10^(10^10)</answer>"),
        (AccuracyReward(compare="symbolic"), "<answer>((10^1000)^1000)^1000</answer>"),
        (AccuracyReward(), "<answer>" * 50_000 + "\\boxed{" * 50_000),
    ],
)
@pytest.mark.timeout(HANG_S)
def test_hostile_completions_score_zero_in_bounded_time(spec, completion):
    assert score(spec, completion, "2", 5) == 0.0


def test_invalid_user_pattern_raises_value_error():
    with pytest.raises(ValueError, match="not a valid regex"):
        score(RegexReward.model_construct(name="regex", weight=1.0, pattern="(?P<"), "x", "", 1)


def test_a_raising_function_is_reported_with_its_name_and_completion_index():
    with pytest.raises(RewardFunctionError) as failure:
        score_completions(
            ["1", "2", "3"],
            answers=["1", "1", " "],
            num_tokens=[1, 1, 1],
            rewards=[FormatReward(pattern=r"\d"), AccuracyReward()],
        )
    assert (failure.value.name, failure.value.index) == ("accuracy", 2)
    assert "reference answer is empty" in str(failure.value)
