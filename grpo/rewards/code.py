"""`code` rewards: the fraction of a record's tests the completion's program passes.

The program is the completion's last fenced code block (or the whole text). It runs with
the tests in the bubblewrap sandbox (sandbox.py), a few sandboxes at a time. A harness in
the sandbox runs the program, then each test, and reports each outcome on a line tagged
with a per-run random nonce, so ordinary output cannot pass for a result.

Two kinds of test:
- call tests, `{"call": "add(1, 2)", "expected": 3}`: only the call goes into the sandbox;
  the harness reports the call's value as JSON and this process compares it with the
  expected value, outside the program's interpreter. A program cannot forge a pass without
  producing the right value: unforgeable.
- assert-style tests, `"assert add(1, 2) == 3"`: run and judged inside the program's own
  interpreter, so a program that reaches the harness (`sys._getframe(1).f_globals`) can
  report passes it did not earn: forgeable, and each completion they score says so in its
  note (the group inspector shows it).

The sandbox bounds what a program can do to the worker either way. Knows nothing of HTTP
servers, SQL or Celery.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from grpo.failures import RewardFunctionError
from grpo.rewards.batch import RewardBatch
from grpo.rewards.kind import Refusal, RewardKind, RunFacts, Scorer, ServerFacts
from grpo.rewards.sandbox import SandboxResult, bubblewrap, check_sandbox, run_sandboxed
from grpo.spec.rewards import CodeReward

MAX_PARALLEL_SANDBOXES = 4
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)

HARNESS = """
import json, sys
job = json.loads(sys.stdin.read())
tag, out = job.pop("nonce"), sys.stdout
def report(what):
    out.write("\\n" + tag + " " + what + "\\n"); out.flush()
scope = {"__name__": "__main__"}
try:
    exec(compile(job["program"], "<completion>", "exec"), scope)
except BaseException as exc:
    report("program " + type(exc).__name__)
    raise SystemExit(0)
for i, test in enumerate(job["tests"]):
    try:
        if isinstance(test, dict):
            value = eval(compile(test["call"], "<call %d>" % i, "eval"), scope)
            report("result %d " % i + json.dumps(value))
        else:
            exec(compile(test, "<test %d>" % i, "exec"), scope)
            report("pass %d" % i)
    except BaseException as exc:
        report("fail %d " % i + type(exc).__name__)
"""
"""Run in the sandbox with the job (program, tests, nonce) as JSON on stdin; a call test
arrives without its expected value."""
FORGEABLE = "forgeable: {} assert-style pass(es), judged inside the program's interpreter"


@dataclass(frozen=True)
class CallTest:
    """A call whose JSON value must equal `expected`, compared outside the sandbox."""

    call: str
    expected: Any


Test = str | CallTest


def extract_program(completion: str) -> str:
    """The last fenced code block of the completion, or the whole text when it has none."""
    blocks = _FENCE.findall(completion)
    return str(blocks[-1]) if blocks else completion


def record_tests(data: dict[str, Any], field: str) -> list[Test]:
    """A record's tests: a list of Python statements and {"call", "expected"} objects, or
    one string of statements."""
    tests = data.get(field)
    if isinstance(tests, str):
        return [tests]
    if isinstance(tests, list) and tests:
        parsed = [_test(t) for t in tests]
        if all(t is not None for t in parsed):
            return [t for t in parsed if t is not None]
    raise ValueError(
        f"record field {field!r} must hold a test string or a list of test strings and "
        '{"call": "<expression>", "expected": <JSON value>} objects'
    )


def _test(item: object) -> Test | None:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and set(item) == {"call", "expected"}:
        if isinstance(item["call"], str):
            return CallTest(item["call"], item["expected"])
    return None


def run_tests(program: str, tests: list[Test], entry: CodeReward) -> tuple[float, str | None]:
    """(fraction of tests passed, a note when the program failed or hit a limit, or when
    assert-style tests, which a program can forge, passed)."""
    nonce = secrets.token_hex(16)
    sent = [t if isinstance(t, str) else {"call": t.call} for t in tests]  # never `expected`
    job = json.dumps({"program": program, "tests": sent, "nonce": nonce})
    result = run_sandboxed(HARNESS, stdin=job, timeout_s=entry.timeout_s, memory_mb=entry.memory_mb)
    passed = passed_tests(result, nonce, tests)
    forged = sum(1 for i in passed if isinstance(tests[i], str))
    notes = [n for n in (_note(result, nonce), FORGEABLE.format(forged) if forged else None) if n]
    return len(passed) / len(tests), "; ".join(notes) or None


def passed_tests(result: SandboxResult, nonce: str, tests: list[Test]) -> set[int]:
    """Indices of the tests passed: an assert-style test by its harness line, a call test by
    exactly one reported value equal to the expected one."""
    passes: set[str] = set()
    values: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        parts = line.split(" ", 3)
        if parts[0] != nonce or len(parts) < 3:
            continue
        if parts[1] == "pass" and len(parts) == 3:
            passes.add(parts[2])
        elif parts[1] == "result" and len(parts) == 4:
            values.setdefault(parts[2], []).append(parts[3])
    passed = set()
    for i, test in enumerate(tests):
        if isinstance(test, str):
            is_passed = str(i) in passes
        else:
            reported = values.get(str(i), [])
            is_passed = len(reported) == 1 and _is_value(reported[0], test.expected)
        if is_passed:
            passed.add(i)
    return passed


def _is_value(reported: str, expected: Any) -> bool:
    try:
        value = json.loads(reported)
    except ValueError:
        return False
    return same_json(value, expected)


def same_json(a: Any, b: Any) -> bool:
    """JSON equality where `true` is not `1` (Python's == says it is); 3 equals 3.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _note(result: SandboxResult, nonce: str) -> str | None:
    if result.note:
        return result.note
    lines = [line for line in result.stdout.splitlines() if line.startswith(f"{nonce} ")]
    for line in lines:
        if line.startswith(f"{nonce} program "):
            return f"the program raised {line.split()[2]}"
    if not lines:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return f"no test result (exit {result.returncode}): {last[:200]}"
    return None


def score_code(entry: CodeReward, batch: RewardBatch, notes: dict[int, str]) -> list[float | None]:
    """Every completion's pass fraction; a record without tests fails the step."""
    g = batch.num_generations
    jobs = []
    for i, completion in enumerate(batch.completions):
        try:
            tests = record_tests(batch.examples[i // g].data, entry.tests_field)
        except ValueError as exc:
            raise RewardFunctionError(entry.label, i, exc) from exc
        jobs.append((extract_program(completion), tests))
    workers = min(MAX_PARALLEL_SANDBOXES, os.cpu_count() or 1, len(jobs))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda job: run_tests(job[0], job[1], entry), jobs))
    notes.update({i: note for i, (_, note) in enumerate(results) if note})
    return [score for score, _ in results]


def check_bubblewrap(entry: CodeReward, server: ServerFacts) -> Refusal | None:
    """The programs run in a bubblewrap sandbox, which this server must have too."""
    if bubblewrap() is not None:
        return None
    return Refusal(
        "",
        "code rewards run in a bubblewrap sandbox and bubblewrap is not installed "
        "on this server (apt-get install bubblewrap)",
    )


def prepare_sandbox(entry: CodeReward, run: RunFacts) -> Scorer:
    """Start the sandbox once before step 1, so a worker that cannot run it says so."""
    check_sandbox()
    return partial(score_code, entry)


CODE = RewardKind("code", check_bubblewrap, prepare_sandbox)
