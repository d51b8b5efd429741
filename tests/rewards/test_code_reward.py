"""Code rewards in the bubblewrap sandbox: tests pass, and escapes score 0 with a note
(grpo/rewards/code.py, grpo/rewards/sandbox.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from grpo.rewards.code import FORGEABLE, CallTest, extract_program, record_tests, run_tests
from grpo.rewards.sandbox import require_bubblewrap
from grpo.spec import CodeReward


@pytest.fixture(autouse=True)
def _has_bubblewrap() -> None:
    """Without bubblewrap every test here fails, naming the package: a skip once hid a
    missing install step (a plain pytest run passed with no code reward tested)."""
    require_bubblewrap()


ENTRY = CodeReward(timeout_s=2, memory_mb=256)
ADD_TESTS = ["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(0, 0) == 1"]


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("```python\ndef f():\n    return 1\n```", "def f():\n    return 1\n"),
        ("first\n```\nx = 1\n```\nthen\n```py\ny = 2\n```", "y = 2\n"),
        ("def g(): pass", "def g(): pass"),
    ],
)
def test_program_is_the_last_fenced_block_or_the_whole_text(completion, expected):
    assert extract_program(completion) == expected


def test_reward_is_the_fraction_of_tests_passed_and_assert_passes_are_marked_forgeable():
    score, note = run_tests("def add(a, b):\n    return a + b", ADD_TESTS, ENTRY)
    assert score == pytest.approx(2 / 3) and note == FORGEABLE.format(2)


ADD_CALLS = [CallTest("add(1, 2)", 3), CallTest("add(2, 2)", 4), CallTest("add(0, 0)", 1)]
FORGER = """
import sys
report = sys._getframe(1).f_globals["report"]
for i in range(3):
    report("pass %d" % i)
    report("result %d 1" % i)
def add(a, b):
    return 0
"""


def test_call_tests_are_judged_outside_the_program_and_carry_no_note():
    score, note = run_tests("def add(a, b):\n    return a + b", ADD_CALLS, ENTRY)
    assert score == pytest.approx(2 / 3) and note is None


def test_the_forging_program_passes_assert_tests_and_scores_zero_on_call_tests():
    """The probe's program reaches the harness's `report` and reports passes: it forges every
    assert-style test, and no call test, whose expected values never enter the sandbox."""
    forged, note = run_tests(FORGER, ADD_TESTS, ENTRY)
    assert forged == 1.0 and note == FORGEABLE.format(3)
    score, note = run_tests(FORGER, ADD_CALLS, ENTRY)
    assert score == 0.0 and note is None


@pytest.mark.parametrize(
    ("returned", "expected", "is_passed"),
    [("True", True, True), ("1", True, False), ("3.0", 3, True), ("(1, 2)", [1, 2], True),
     ("{'a': None}", {"a": None}, True), ("object()", "x", False), ("'3'", 3, False)],
)  # fmt: skip
def test_a_call_passes_only_with_the_expected_json_value(returned, expected, is_passed):
    score, _ = run_tests(f"def f():\n    return {returned}", [CallTest("f()", expected)], ENTRY)
    assert score == (1.0 if is_passed else 0.0)


def test_records_hold_statements_and_call_objects_and_nothing_else():
    tests = record_tests({"t": ["assert 1", {"call": "f()", "expected": [1]}]}, "t")
    assert tests == ["assert 1", CallTest("f()", [1])]
    for bad in ([{"call": "f()"}], [{"call": 1, "expected": 1}], [3], []):
        with pytest.raises(ValueError, match="call"):
            record_tests({"t": bad}, "t")


def test_printed_lookalike_results_do_not_count():
    program = "print('pass 0'); print('pass 1')\ndef add(a, b):\n    return 0"
    score, _ = run_tests(program, ADD_TESTS, ENTRY)
    assert score == 0.0


def test_a_program_that_raises_scores_zero_with_a_note():
    score, note = run_tests("raise SystemExit(0)", ADD_TESTS, ENTRY)
    assert score == 0.0 and note == "the program raised SystemExit"


def _listening_socket() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def _escapes(tmp_path: Path, port: int) -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (program run before `add` is defined, words one of which the note says)."""
    secret = tmp_path / "data" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("hunter2")
    return {
        "fork bomb": ("import os\nwhile True:\n    os.fork()", ("raised", "CPU", "wall")),
        # a loaded machine may reach the wall-clock limit before the CPU one
        "infinite loop": ("while True:\n    pass", ("CPU", "wall")),
        "10 GB allocation": ("x = bytearray(10 * 2**30)", ("memory", "MemoryError")),
        "write outside": (
            f"open({str(tmp_path / 'escaped')!r}, 'w').write('x')",
            ("raised FileNotFoundError",),
        ),
        "read data dir": (f"print(open({str(secret)!r}).read())", ("raised FileNotFoundError",)),
        "socket to the API": (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)",
            ("raised",),
        ),
        "print 1 GB": (
            "import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * 2**20)",
            ("size",),
        ),
    }


@pytest.mark.parametrize(
    "name",
    [
        "fork bomb",
        "infinite loop",
        "10 GB allocation",
        "write outside",
        "read data dir",
        "socket to the API",
        "print 1 GB",
    ],
)
@pytest.mark.timeout(60)  # a hang fails here: the sandbox kills its process at 2 x 2 + 1 s
def test_escape_attempts_score_zero_with_a_note_and_leave_the_host_alone(tmp_path, name):
    server = _listening_socket()
    try:
        program, words = _escapes(tmp_path, server.getsockname()[1])[name]
        score, note = run_tests(program + "\ndef add(a, b):\n    return a + b", ADD_TESTS, ENTRY)
        server.settimeout(0.1)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing connected from inside
    finally:
        server.close()
    assert score == 0.0
    assert note is not None and any(word in note for word in words), note
    assert not (tmp_path / "escaped").exists()


def test_a_step_scores_each_completion_and_notes_which_one_hit_a_limit():
    from grpo.data.code_task import code_examples
    from grpo.rewards.batch import RewardBatch
    from grpo.rewards.scoring import Rewarder

    add = next(e for e in code_examples("train") if e.id == "add")
    completions = [f"```python\n{add.answer}\n```", "while True:\n    pass"]
    batch = RewardBatch(
        run_id="r",
        step=1,
        examples=[add],
        prompts=[add.prompt],
        completions=completions,
        num_tokens=[1, 1],
    )
    outcome = Rewarder([CodeReward(timeout_s=1, memory_mb=256)]).score(batch)
    assert outcome.scores["code"] == [1.0, 0.0]
    assert list(outcome.notes) == [1] and outcome.notes[1].startswith("code: killed")
