"""The cause of a failure as its user reads it: the exception that started it (its type and
message) and the last frames of its traceback, file:line and function, our code's and the
user's (a reward plugin's), with secrets scrubbed (grpo/scrub.py) and the size bounded.

The exception that started it is the innermost of the chain: the one a RewardFunctionError
or a rank's RankError was raised from, as Python's own traceback prints it first. Its
frames are the last MAX_FRAMES of the traceback (a deep recursion keeps its deepest
frames, and the count of those left out), each field cut to a bound, so a cause is a few
kilobytes at most whatever failed. `user_message` (grpo/failures.py) words the one line a
user sees; this is what is behind it. Imports no torch: a run's process whose environment
broke under it can still say why (worker/rank_entry.py).
"""

from __future__ import annotations

import linecache
import os
from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any

from grpo.scrub import hide, secret_values

MAX_FRAMES = 10
MAX_MESSAGE_CHARS = 1000
MAX_PATH_CHARS = 240
MAX_NAME_CHARS = 120
MAX_CODE_CHARS = 200
MAX_CHAIN = 50
"""How far down a chain of causes to look (a chain can loop through __context__)."""


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    code: str
    """The source line, stripped; '' when it cannot be read."""


@dataclass(frozen=True)
class Cause:
    type: str
    """The exception's class as Python's traceback names it: `ValueError`,
    `torch.OutOfMemoryError`."""
    message: str
    frames: tuple[Frame, ...]
    """The last frames of its traceback, innermost last."""
    omitted_frames: int = 0
    """Outer frames left out."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Cause | None:
        """A cause read back (a file a run's process wrote); bounded again, None when it is
        not one."""
        try:
            frames = tuple(
                Frame(
                    file=_cut_path(str(f["file"])),
                    line=int(f["line"]),
                    function=_cut(str(f["function"]), MAX_NAME_CHARS),
                    code=_cut(str(f["code"]), MAX_CODE_CHARS),
                )
                for f in list(data["frames"])[-MAX_FRAMES:]
            )
            dropped = max(len(data["frames"]) - MAX_FRAMES, 0)
            return cls(
                type=_cut(str(data["type"]), MAX_NAME_CHARS),
                message=_cut(str(data["message"]), MAX_MESSAGE_CHARS),
                frames=frames,
                omitted_frames=int(data.get("omitted_frames", 0)) + dropped,
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def scrubbed(self, env: Mapping[str, str] | None = None) -> Cause:
        """The same cause with every secret of `env` (default this process's) hidden."""
        secrets = secret_values(os.environ if env is None else env)
        return Cause(
            type=self.type,
            message=hide(self.message, secrets),
            frames=tuple(
                Frame(hide(f.file, secrets), f.line, f.function, hide(f.code, secrets))
                for f in self.frames
            ),
            omitted_frames=self.omitted_frames,
        )

    def as_text(self) -> str:
        """As Python prints a traceback, with how many outer frames were left out."""
        shown = len(self.frames)
        if self.omitted_frames:
            head = f"last {shown} of {shown + self.omitted_frames} frames"
        else:
            head = "most recent call last"
        lines = [f"Traceback ({head}):"]
        for frame in self.frames:
            lines.append(f'  File "{frame.file}", line {frame.line}, in {frame.function}')
            if frame.code:
                lines.append(f"    {frame.code}")
        lines.append(f"{self.type}: {self.message}" if self.message else self.type)
        return "\n".join(lines)

    def where(self) -> str:
        """The innermost frame as `file:line in function`; '' without frames."""
        if not self.frames:
            return ""
        last = self.frames[-1]
        return f"{last.file}:{last.line} in {last.function}"


def cause_of(exc: BaseException, env: Mapping[str, str] | None = None) -> Cause:
    """The cause of `exc`: its innermost exception, with the last frames of the deepest
    traceback in the chain, secrets of `env` (default this process's) scrubbed."""
    secrets = secret_values(os.environ if env is None else env)
    chain = _chain(exc)
    root = chain[-1]
    traced = next((e for e in reversed(chain) if e.__traceback__ is not None), root)
    frames, omitted = _last_frames(traced.__traceback__, secrets)
    return Cause(
        type=_cut(_type_name(root), MAX_NAME_CHARS),
        message=_shown(_message(root), MAX_MESSAGE_CHARS, secrets),
        frames=frames,
        omitted_frames=omitted,
    )


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from or during, outermost first."""
    chain = [exc]
    while len(chain) < MAX_CHAIN:
        last = chain[-1]
        inner = last.__cause__ or (None if last.__suppress_context__ else last.__context__)
        if inner is None or any(inner is seen for seen in chain):
            break
        chain.append(inner)
    return chain


def _last_frames(
    tb: TracebackType | None, secrets: Collection[str]
) -> tuple[tuple[Frame, ...], int]:
    """The last MAX_FRAMES frames of `tb` and how many came before them; only those kept
    are read (a recursion's thousand frames cost a counter)."""
    kept: deque[tuple[Any, int]] = deque(maxlen=MAX_FRAMES)
    total = 0
    while tb is not None:
        kept.append((tb.tb_frame, tb.tb_lineno))
        total += 1
        tb = tb.tb_next
    frames = []
    for frame, line in kept:
        code = frame.f_code
        source = linecache.getline(code.co_filename, line, frame.f_globals).strip()
        frames.append(
            Frame(
                file=_cut_path(hide(code.co_filename, secrets)),
                line=line,
                function=_cut(code.co_name, MAX_NAME_CHARS),
                code=_shown(source, MAX_CODE_CHARS, secrets),
            )
        )
    return tuple(frames), total - len(frames)


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the failure
        return f"<{type(exc).__name__}: its message could not be read>"


def _shown(text: str, limit: int, secrets: Collection[str]) -> str:
    """`text` scrubbed, then cut to `limit` characters: scrubbed first, so that no secret is
    cut in two and half of it shown; over a head of 4 x `limit` characters, so that a
    message of megabytes costs no more than one of kilobytes."""
    head = hide(text[: 4 * limit], secrets)
    if len(text) > 4 * limit:
        return _cut(head, limit, length=len(text))
    return _cut(head, limit)


def _cut(text: str, limit: int, *, length: int | None = None) -> str:
    """`text` within `limit` characters, saying how many of its `length` (default its own)
    were cut; NUL written out (the store is PostgreSQL's text)."""
    length = len(text) if length is None else length
    if length <= limit:
        return text.replace("\x00", "\\x00")
    return f"{text[:limit]}… ({length - limit} more characters)".replace("\x00", "\\x00")


def _cut_path(path: str) -> str:
    """A path within MAX_PATH_CHARS, keeping its end (the file and its folders)."""
    path = path.replace("\x00", "\\x00")
    return path if len(path) <= MAX_PATH_CHARS else "…" + path[-(MAX_PATH_CHARS - 1) :]
