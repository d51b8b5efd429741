"""A failure's cause as its user reads it (grpo/cause.py): the innermost exception of the
chain with the last frames of its traceback, secrets scrubbed (grpo/scrub.py) and the size
bounded; kept by a launched rank beside its error file and read back by the launcher's
process for the rank that caused the failure (grpo/parallel/kept_cause.py, launch.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from grpo import cause as cause_module
from grpo.cause import MAX_FRAMES, MAX_MESSAGE_CHARS, Cause, cause_of
from grpo.failures import RewardFunctionError
from grpo.parallel.kept_cause import CAUSE_FILE, ERROR_FILE_ENV, keep_cause, read_cause
from grpo.parallel.launch import RankError, failure_cause, keep_failure_report
from grpo.scrub import scrub

HERE = str(Path(__file__))


def plugin_reward(completions: list[str]) -> list[float]:
    scores = []
    for completion in completions:
        scores.append(grade(completion))
    return scores


def grade(completion: str) -> float:
    raise ValueError(f"cannot grade {completion!r}")


def wrapped_as_the_ranks_wrap_it() -> BaseException:
    """A reward's error as a rank raises it: RankError from a located RewardFunctionError
    from a RewardFunctionError from what the function raised (grpo/rewards/scoring.py)."""
    try:
        try:
            try:
                plugin_reward(["42"])
            except ValueError as exc:
                raise RewardFunctionError("exact", None, exc) from exc
        except RewardFunctionError as exc:
            raise exc.located(step=3, prompt_id="q1") from exc
    except RewardFunctionError as exc:
        try:
            raise RankError(str(exc)) from exc
        except RankError as rank:
            return rank
    raise AssertionError("unreachable")


def test_the_cause_is_what_the_function_raised_with_its_frames_innermost_last() -> None:
    cause = cause_of(wrapped_as_the_ranks_wrap_it(), env={})
    assert (cause.type, cause.message) == ("ValueError", "cannot grade '42'")
    assert [f.function for f in cause.frames] == [
        "wrapped_as_the_ranks_wrap_it",
        "plugin_reward",
        "grade",
    ]
    assert {f.file for f in cause.frames} == {HERE}
    assert cause.frames[-1].code == """raise ValueError(f"cannot grade {completion!r}")"""
    assert cause.frames[-1].line == grade.__code__.co_firstlineno + 1
    assert cause.omitted_frames == 0
    assert cause.where() == f"{HERE}:{cause.frames[-1].line} in grade"


def test_the_cause_reads_as_pythons_traceback() -> None:
    text = cause_of(wrapped_as_the_ranks_wrap_it(), env={}).as_text().splitlines()
    assert text[0] == "Traceback (most recent call last):"
    assert text[-3:] == [
        f'  File "{HERE}", line {grade.__code__.co_firstlineno + 1}, in grade',
        '    raise ValueError(f"cannot grade {completion!r}")',
        "ValueError: cannot grade '42'",
    ]


def test_a_class_outside_builtins_is_named_with_its_module() -> None:
    try:
        raise json.JSONDecodeError("bad", "{", 0)
    except ValueError as exc:
        assert cause_of(exc, env={}).type == "json.decoder.JSONDecodeError"


def recurse(n: int) -> int:
    return recurse(n + 1) + 1


def test_a_deep_recursion_keeps_its_deepest_frames_and_a_count_of_the_rest() -> None:
    try:
        recurse(0)
    except RecursionError as exc:
        cause = cause_of(exc, env={})
    assert len(cause.frames) == MAX_FRAMES
    assert cause.omitted_frames > 100
    assert {f.function for f in cause.frames} == {"recurse"}
    assert len(json.dumps(cause.as_dict())) < 4000
    assert cause.as_text().startswith(
        f"Traceback (last {MAX_FRAMES} of {MAX_FRAMES + cause.omitted_frames} frames):"
    )


def test_every_field_is_bounded_and_storable() -> None:
    huge = "x" * 5_000_000 + "\x00"
    cause = cause_of(ValueError(huge), env={})  # never raised: no frames
    assert cause.frames == () and cause.omitted_frames == 0
    assert len(cause.message) < MAX_MESSAGE_CHARS + 40
    assert cause.message.endswith(f"… ({5_000_001 - MAX_MESSAGE_CHARS} more characters)")
    assert "\x00" not in cause_of(ValueError("a\x00b"), env={}).message
    hostile = {
        "type": "T" * 10_000,
        "message": "\x00" * 10,
        "frames": [{"file": "/a" * 1000, "line": 1, "function": "f", "code": ""}] * 500,
    }
    read = Cause.from_dict(hostile)
    assert read is not None
    assert len(read.frames) == MAX_FRAMES and read.omitted_frames == 500 - MAX_FRAMES
    assert "\x00" not in read.message and len(read.type) < 200
    assert all(len(f.file) <= cause_module.MAX_PATH_CHARS for f in read.frames)
    assert Cause.from_dict({"type": "T"}) is None and Cause.from_dict([1, 2]) is None


def test_a_message_that_cannot_be_read_does_not_hide_the_failure() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert cause_of(Unprintable(), env={}).message == (
        "<Unprintable: its message could not be read>"
    )


ENV = {
    "GRPO_API_TOKENS": "alice:admin:s3cret-alice-token,bare-admin-token-9",
    "HF_TOKEN": "hf_abcdefghijklmnop",
    "GRPO_DATABASE_URL": "postgresql+psycopg://grpo:db-pass-1234@db:5432/grpo",
    "GRPO_REWARD_TOKEN_ENVS": "JUDGE_CREDS,SHORTNAME",
    "JUDGE_CREDS": "judge-creds-value",
    "SHORTNAME": "short",  # too short to tell from a word
    "SSH_AUTH_SOCK": sys.prefix,  # a path: where a secret is, not the secret
    "HOME": "/root",
}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "auth with s3cret-alice-token and bare-admin-token-9",
            "auth with *** and ***",
        ),
        ("hub said hf_abcdefghijklmnop is expired", "hub said *** is expired"),
        (
            "no route to postgresql+psycopg://grpo:db-pass-1234@db/x",
            "no route to postgresql+psycopg://grpo:***@db/x",
        ),
        ("the password db-pass-1234 alone", "the password *** alone"),
        ("https://u:other-pw@judge.example/score", "https://u:***@judge.example/score"),
        ("Authorization: Bearer abc.DEF-123_xyz", "Authorization: Bearer ***"),
        ("judge says judge-creds-value", "judge says ***"),
        (
            "a short word, JUDGE_CREDS and GRPO_REWARD_TOKEN_ENVS",
            "a short word, JUDGE_CREDS and GRPO_REWARD_TOKEN_ENVS",
        ),
        (f"{sys.prefix}/lib/python3 stays", f"{sys.prefix}/lib/python3 stays"),
    ],
)
def test_secrets_of_the_environment_are_scrubbed(text: str, shown: str) -> None:
    assert scrub(text, ENV) == shown


def test_a_secret_is_hidden_before_the_message_is_cut_not_cut_in_two() -> None:
    straddling = "x" * (MAX_MESSAGE_CHARS - 4) + ENV["HF_TOKEN"] + "y" * 10_000
    shown = cause_of(ValueError(straddling), env=ENV).message
    assert "hf_a" not in shown and shown.startswith("x" * (MAX_MESSAGE_CHARS - 4) + "***")


def test_a_cause_is_scrubbed_in_its_message_and_its_source_lines() -> None:
    def leak() -> None:
        raise PermissionError("hf_abcdefghijklmnop refused")  # hf_abcdefghijklmnop

    try:
        leak()
    except PermissionError as exc:
        cause = cause_of(exc, env=ENV)
    assert cause.message == "*** refused"
    assert cause.frames[-1].code == 'raise PermissionError("*** refused")  # ***'


def test_a_launched_rank_keeps_its_cause_beside_its_error_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    error_file = tmp_path / "attempt_0" / "0" / "error.json"
    keep_cause(ValueError("not launched"))  # no error file named: nothing kept, no error
    monkeypatch.setenv(ERROR_FILE_ENV, str(error_file))
    exc = wrapped_as_the_ranks_wrap_it()
    keep_cause(exc)
    assert (error_file.parent / CAUSE_FILE).exists()
    assert read_cause(error_file) == cause_of(exc)
    assert read_cause(tmp_path / "elsewhere" / "error.json") is None


def failed_rank(
    folder: Path, local_rank: int, text: str | None, *, exitcode: int = 1
) -> ProcessFailure:
    """A rank's failure as the launcher reports it, its error file written as torch writes it."""
    error_file = folder / str(local_rank) / "error.json"
    error_file.parent.mkdir(parents=True)
    if text is not None:
        message = {"message": text, "extraInfo": {"py_callstack": "...", "timestamp": "1"}}
        error_file.write_text(json.dumps({"message": message}))
    return ProcessFailure(
        local_rank=local_rank, pid=100 + local_rank, exitcode=exitcode, error_file=str(error_file)
    )


def test_the_launcher_reads_the_cause_of_the_rank_that_failed_on_its_own(tmp_path: Path) -> None:
    """Rank 1 raised; the launcher saw rank 0 fail first, its collective broken by rank 1's
    exit: the cause read is rank 1's (as failure_message names rank 1)."""
    attempt = tmp_path / "attempt_0"
    collateral = failed_rank(attempt, 0, "RuntimeError: Connection closed by peer")
    cause = failed_rank(attempt, 1, "RankError: reward function 'exact' failed")
    kept = cause_of(wrapped_as_the_ranks_wrap_it(), env={})
    (attempt / "1" / CAUSE_FILE).write_text(json.dumps(kept.as_dict()))
    error = ChildFailedError("rank_main", {0: collateral})
    assert failure_cause(error) == kept
    assert failure_cause(ChildFailedError("rank_main", {1: cause})) == kept
    killed = failed_rank(tmp_path / "attempt_1", 0, None, exitcode=-9)
    assert failure_cause(ChildFailedError("rank_main", {0: killed})) is None


def test_the_kept_report_holds_the_causes_traceback_when_the_launcher_saw_a_peer_fail_first(
    tmp_path: Path,
) -> None:
    """The launcher stops at the first failed rank it polls, which may be one whose collective
    broke on the cause's exit: the report kept for the user still holds the cause (its
    exception and traceback), as the one-line message names it (a CI run saw only the peer's)."""
    attempt = tmp_path / "attempt_0"
    collateral = failed_rank(attempt, 0, "RuntimeError: Check the logs of the remote worker")
    failed_rank(attempt, 1, "RankError: the reference answer is empty")
    report = keep_failure_report(ChildFailedError("rank_main", {0: collateral}), tmp_path / "r")
    text = report.read_text()
    assert "Root Cause" in text and "the reference answer is empty" in text, text
    assert str(attempt / "1" / "error.json") in text
    # the cause first seen by the launcher: its report alone, nothing appended
    cause = failed_rank(tmp_path / "attempt_1", 1, "RankError: the reference answer is empty")
    alone = keep_failure_report(ChildFailedError("rank_main", {1: cause}), tmp_path / "s")
    assert "failed first" not in alone.read_text()


def test_what_a_rank_kept_is_bounded_again_when_read(tmp_path: Path) -> None:
    error_file = tmp_path / "0" / "error.json"
    error_file.parent.mkdir()
    frames = [{"file": "f.py", "line": i, "function": "f", "code": ""} for i in range(50)]
    data = {"type": "E", "message": "m" * 10_000, "frames": frames, "omitted_frames": 7}
    (error_file.parent / CAUSE_FILE).write_text(json.dumps(data))
    read = read_cause(error_file)
    assert read is not None and len(read.frames) == MAX_FRAMES
    assert read.frames[-1].line == 49 and read.omitted_frames == 7 + 50 - MAX_FRAMES
