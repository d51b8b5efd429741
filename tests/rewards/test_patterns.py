"""User patterns (grpo/spec/patterns.py): compiled one way, under a size budget, a match timeout
and a bounded cache; measured against the bombs a hostile probe used."""

from __future__ import annotations

from typing import Any

import pytest
import regex
from pydantic import ValidationError

from grpo.rewards.rules import score_completions
from grpo.spec import FormatReward, JobSpec, RegexReward, patterns
from grpo.spec.patterns import (
    MAX_PATTERN_NODES,
    PatternRefused,
    PatternTooLarge,
    compile_pattern,
    pattern_nodes,
)

BOMBS = [
    "(?:(?:a{99}){99}){300}",  # 472 MB -> 1,250 MB on a worker, kept by an lru_cache
    "(?:(?:a{999}){999}){999}",  # a 4 GiB limit after 18 s
    "a{99999}",
    r"(?:\X){5000}",
    r"(?:(a)(?1)){2000}",
]


@pytest.mark.parametrize(
    ("pattern", "nodes"),
    [
        # the pattern is a sequence node holding its items
        ("a", 1 + 1),
        ("a{5}", 1 + 1 + 5),  # the repeat, and its body five times
        ("a{0,99999}", 1 + 1 + 1),  # open-ended counts are not expanded
        ("a{3,}", 1 + 1 + 3),
        ("(?:ab){3}", 1 + 1 + 3 * (1 + 2)),  # each copy: a sequence of two characters
        ("(?:a{2}){3}", 1 + 1 + 3 * (1 + 1 + 2)),  # each copy: a sequence holding a{2}
    ],
)
def test_nodes_count_each_repetition_by_its_minimum(pattern, nodes):
    assert pattern_nodes(pattern) == nodes


@pytest.mark.parametrize("pattern", BOMBS)
@pytest.mark.timeout(15)  # compiling a bomb takes seconds to minutes; refusing it, microseconds
def test_bombs_are_refused_before_compiling(pattern, monkeypatch):
    compiled: list[str] = []

    def compile_and_note(pattern: str, *args: Any, **kwargs: Any) -> Any:
        compiled.append(pattern)
        return real_compile(pattern, *args, **kwargs)

    real_compile = regex.compile
    monkeypatch.setattr(regex, "compile", compile_and_note)
    with pytest.raises(PatternTooLarge, match="over the limit"):
        compile_pattern(pattern)
    assert compiled == []  # refused on regex's parse alone
    literal = regex.escape(pattern)  # the same text as a literal: small, and not cached yet
    assert compile_pattern(literal).fullmatch(pattern)
    assert compiled == [literal]  # the spy does see the compiles there are


@pytest.mark.parametrize("pattern", BOMBS[:2])
def test_the_spec_refuses_bombs_naming_the_field(pattern):
    with pytest.raises(ValidationError) as refused:
        JobSpec(rewards=[{"name": "regex", "pattern": pattern}])
    (error,) = refused.value.errors()
    assert error["loc"][:4] == ("rewards", 0, "regex", "pattern")


def test_the_spec_accepts_what_regex_accepts_and_re_does_not():
    # the API used to check with `re`; the worker compiles with `regex`
    RegexReward(pattern=r"\p{Lu}\p{Ll}+")
    with pytest.raises(ValidationError, match="not a valid regex"):
        RegexReward(pattern="(unclosed")


def test_a_pattern_at_the_budget_compiles_and_one_over_is_refused():
    compile_pattern(f"ab{{{MAX_PATTERN_NODES - 3}}}")  # sequence, a, repeat, n x b
    with pytest.raises(PatternTooLarge):
        compile_pattern(f"ab{{{MAX_PATTERN_NODES - 2}}}")


def test_the_cache_is_bounded_by_total_size():
    for n in range(200):
        compile_pattern(f"x{{{5000 + n}}}y")
    held = sum(size for _, size in patterns._cache.values())
    assert held <= patterns.CACHE_NODES and len(patterns._cache) <= 8


def test_a_stored_bomb_scores_zero_with_a_note_on_the_worker():
    bomb = RegexReward.model_construct(name="regex", label="bomb", weight=1.0, pattern=BOMBS[0])
    notes: dict[int, str] = {}
    scores = score_completions(["aaa", "b"], answers=["", ""], num_tokens=[1, 1], rewards=[bomb],
                               notes=notes)  # fmt: skip
    assert scores == {"bomb": [0.0, 0.0]}
    assert set(notes) == {0, 1} and "pattern refused" in notes[0]


def test_a_match_past_the_timeout_scores_zero_with_a_note():
    slow = FormatReward(pattern=r"(x+x+)+y", label="slow")
    notes: dict[int, str] = {}
    scores = score_completions(["x" * 5000, "xxy"], answers=["", ""], num_tokens=[1, 1],
                               rewards=[slow], notes=notes)  # fmt: skip
    assert scores == {"slow": [0.0, 1.0]}
    assert list(notes) == [0] and "ran past" in notes[0]


def test_an_invalid_pattern_is_refused_not_scored():
    with pytest.raises(PatternRefused, match="not a valid regex"):
        compile_pattern("(?P<")
