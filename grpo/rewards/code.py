"""`code` rewards: the fraction of a record's tests the completion's program passes.

The program is the completion's last fenced code block (or the whole text). It runs with
the tests in the bubblewrap sandbox (sandbox.py), a few sandboxes at a time. A harness in
the sandbox runs the program, then each test, and reports each outcome on a line tagged
with a per-run random nonce, so ordinary output cannot pass for a result. The sandbox
bounds what a program can do to the worker; it does not make scores unforgeable by a
program that inspects its own interpreter. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
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
        exec(compile(test, "<test %d>" % i, "exec"), scope)
        report("pass %d" % i)
    except BaseException as exc:
        report("fail %d " % i + type(exc).__name__)
"""
"""Run in the sandbox with the job (program, tests, nonce) as JSON on stdin."""


def extract_program(completion: str) -> str:
    """The last fenced code block of the completion, or the whole text when it has none."""
    blocks = _FENCE.findall(completion)
    return str(blocks[-1]) if blocks else completion


def record_tests(data: dict[str, Any], field: str) -> list[str]:
    """A record's tests: a list of Python statements or one string of them."""
    tests = data.get(field)
    if isinstance(tests, str):
        return [tests]
    if isinstance(tests, list) and tests and all(isinstance(t, str) for t in tests):
        return tests
    raise ValueError(f"record field {field!r} must hold a test string or a list of them")


def run_tests(program: str, tests: list[str], entry: CodeReward) -> tuple[float, str | None]:
    """(fraction of tests passed, a note when the program failed or hit a limit)."""
    nonce = secrets.token_hex(16)
    job = json.dumps({"program": program, "tests": tests, "nonce": nonce})
    result = run_sandboxed(HARNESS, stdin=job, timeout_s=entry.timeout_s, memory_mb=entry.memory_mb)
    return passed_fraction(result, nonce, len(tests)), _note(result, nonce)


def passed_fraction(result: SandboxResult, nonce: str, num_tests: int) -> float:
    passed = {
        line.split()[2]
        for line in result.stdout.splitlines()
        if line.startswith(f"{nonce} pass ") and len(line.split()) == 3
    }
    return len(passed & {str(i) for i in range(num_tests)}) / num_tests


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
