"""The fixed list of ways a reward function can fail, and which one an exception is.

A reward test (grpo/rewards/trial.py) answers each failure with one of FAILURE_KINDS and
its message, as OpenAI's grader validation did (runtime error, parse error, unresponsive).
An exception says its kind by a `failure_kind` attribute (the classes below, an endpoint's
EndpointError, a judge's unparsable answer); any other exception is a runtime error, or a
timeout or out-of-memory by its type. Imports without torch. Knows nothing of HTTP servers,
SQL or Celery.
"""

from __future__ import annotations

from typing import Literal, get_args

FailureKind = Literal[
    "runtime_error",
    "bad_return_value",
    "timeout",
    "host_refused",
    "unreachable",
    "unparsable_judge_answer",
    "out_of_memory",
    "cannot_load",
]
"""runtime_error: the function raised; bad_return_value: it returned something other than
one number or null per completion; timeout: it ran past its time limit (or its endpoint,
its sandbox did); host_refused: its endpoint's host is not one this server allows;
unreachable: its endpoint could not be reached or kept answering 5xx; unparsable_judge_answer:
a judge answered without a score the parser reads; out_of_memory: it ran past its memory
limit; cannot_load: the entry could not be prepared (a function not found, a model that
does not load)."""
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)


class BadReturnValue(ValueError):
    """A reward function returned something that is not one number or None per completion."""

    failure_kind: FailureKind = "bad_return_value"


class ScoreTimeout(TimeoutError):
    """A reward function ran past the time a reward test gives one call."""

    failure_kind: FailureKind = "timeout"


class HostRefused(ValueError):
    """An endpoint's host is not one this server allows."""

    failure_kind: FailureKind = "host_refused"


class UnparsableJudgeAnswer(ValueError):
    """A judge answered, but without a score its parser reads."""

    failure_kind: FailureKind = "unparsable_judge_answer"


def failure_kind(exc: BaseException) -> FailureKind:
    """The kind of a failure: the first `failure_kind` along its causes (a reward's own
    error wraps what it caught), else by type, else a runtime error."""
    seen: set[int] = set()
    chain: BaseException | None = exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        kind = getattr(chain, "failure_kind", None)
        if kind in FAILURE_KINDS:
            return kind  # type: ignore[no-any-return]
        if isinstance(chain, MemoryError):
            return "out_of_memory"
        if isinstance(chain, TimeoutError):
            return "timeout"
        chain = getattr(chain, "cause", None) or chain.__cause__ or chain.__context__
    return "runtime_error"
