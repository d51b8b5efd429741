"""User regular expressions (`format` and `regex` rewards): one way to compile them, bounded.

The API checks a pattern and the worker compiles it with the one function here: the `regex`
module, flag DOTALL, nothing else. Its compiler writes out a counted repetition's required
copies (`a{1000}` is a thousand nodes; `(?:a{1000}){1000}` a million: 260 MB and 2.5 s,
measured), in C, with no timeout. So before compiling, the pattern is parsed by regex's own
parser (cheap: it expands nothing) and its compiled size is bounded: each node counts 1 and
a repetition multiplies its body by its minimum count, which is what the compiler expands
(`a{0,1000}` and `a{1000,}`: 1 and 1000). Over MAX_PATTERN_NODES the pattern is refused
(a 422 at submit; on the worker its reward scores 0 with a note), which also bounds the
compile's time (tens of ms) and memory (a few MB).

Compiled patterns are kept in a small LRU bounded by their total size, and regex's own
module cache is bypassed. A match runs under regex's wall-clock timeout: a completion that
makes a pattern backtrack for longer is no match, with a note. Knows nothing of models.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import regex
from regex import _regex_core

PATTERN_FLAGS = regex.DOTALL
"""The flags of every user pattern, on the API and on the worker."""
MAX_PATTERN_NODES = 10_000
"""Most nodes a pattern may compile to: at most 260 bytes each in regex's compiled form
(measured per node kind), so under 3 MB and about 50 ms of compile."""
CACHE_NODES = 40_000
"""Most nodes the compiled-pattern cache holds, all entries together (about 10 MB)."""
MATCH_TIMEOUT_S = 0.05
"""Wall-clock budget of one pattern match against one completion."""


class PatternRefused(ValueError):
    """A pattern that does not compile, or would compile to more than MAX_PATTERN_NODES."""


class PatternTooLarge(PatternRefused):
    """A valid pattern that would compile to more than MAX_PATTERN_NODES."""


def pattern_nodes(pattern: str) -> int:
    """How many nodes `pattern` compiles to, counted on regex's own parse (no compile)."""
    try:
        parsed = _parse(pattern)
    except regex.error as exc:
        raise PatternRefused(f"not a valid regex: {exc}") from None
    # a group call compiles the group again (once per variant): charge the whole pattern
    whole = _nodes(parsed, call_nodes=1)
    return _nodes(parsed, call_nodes=whole)


def check_pattern(pattern: str) -> None:
    """Refuse (PatternRefused) a pattern the worker would not compile."""
    compile_pattern(pattern)


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """The compiled pattern, from the cache when it is there."""
    with _cache_lock:
        hit = _cache.get(pattern)
        if hit is not None:
            _cache.move_to_end(pattern)
            return hit[0]
    size = pattern_nodes(pattern)
    if size > MAX_PATTERN_NODES:
        raise PatternTooLarge(
            f"the pattern compiles to about {size:,} regex nodes (its counted repetitions "
            f"multiply), over the limit of {MAX_PATTERN_NODES:,}: use smaller counts, or "
            "open-ended ones (`{0,n}`, `*`, `+`) which are not expanded"
        )
    try:
        compiled = regex.compile(pattern, flags=PATTERN_FLAGS, cache_pattern=False)
    except regex.error as exc:
        raise PatternRefused(f"not a valid regex: {exc}") from None
    _remember(pattern, compiled, size)
    return compiled


def search_pattern(pattern: str, text: str, *, full: bool) -> bool | None:
    """Whether the pattern matches the whole text (`full`) or is found in it; None when the
    match ran out of time (MATCH_TIMEOUT_S)."""
    compiled = compile_pattern(pattern)
    try:
        if full:
            return compiled.fullmatch(text, timeout=MATCH_TIMEOUT_S) is not None
        return compiled.search(text, timeout=MATCH_TIMEOUT_S) is not None
    except TimeoutError:
        return None


def _parse(pattern: str) -> Any:
    """regex's parse tree of the pattern, as regex.compile parses it (same flags, same
    retry when an inline flag turns out to be global)."""
    flags = PATTERN_FLAGS
    while True:
        source = _regex_core.Source(pattern)
        info = _regex_core.Info(flags, source.char_type, {})
        info.guess_encoding = regex.UNICODE
        source.ignore_space = bool(info.flags & regex.VERBOSE)
        try:
            parsed = _regex_core._parse_pattern(source, info)
        except _regex_core._UnscopedFlagSet:
            flags = info.global_flags
            continue
        if not source.at_end():
            raise regex.error("unbalanced parenthesis", pattern, source.pos)
        return parsed


def _nodes(node: Any, *, call_nodes: int) -> int:
    """1 per node (3 per grapheme, which compiles to 2.4 times a character's 260 bytes); a
    repetition counts its body max(1, minimum count) times."""
    if isinstance(node, _regex_core.CallGroup | _regex_core.CallRef):
        return call_nodes
    inner = sum(_nodes(child, call_nodes=call_nodes) for child in _children(node))
    count = max(1, node.min_count) if isinstance(node, _regex_core.GreedyRepeat) else 1
    own = 3 if isinstance(node, _regex_core.Grapheme) else 1
    return own + inner * count


def _children(node: Any) -> list[Any]:
    """Every parse node held by `node`, whatever attribute holds it (subpattern, items,
    branches, yes_item, ...), so a node kind added to regex is still counted."""
    found: list[Any] = []
    for value in vars(node).values():
        if isinstance(value, _regex_core.RegexBase):
            found.append(value)
        elif isinstance(value, list | tuple):
            found.extend(v for v in value if isinstance(v, _regex_core.RegexBase))
    return found


_cache: OrderedDict[str, tuple[regex.Pattern[str], int]] = OrderedDict()
_cache_lock = threading.Lock()


def _remember(pattern: str, compiled: regex.Pattern[str], size: int) -> None:
    with _cache_lock:
        _cache[pattern] = (compiled, size)
        total = sum(s for _, s in _cache.values())
        while total > CACHE_NODES and len(_cache) > 1:
            _, (_, dropped) = _cache.popitem(last=False)
            total -= dropped
