"""Rewards before a run: test a spec's reward entries on given samples, and probe a spec's
rewards for holes with adversarial completions of its first records (preflight).

Both score in a process of their own, as a worker scores a step (app/api/reward_trials.py),
take the role that submits runs, and refuse up front, with a 422 naming the field, what
submit would refuse in the rewards (a host not allowed, a plugin not found) and malformed
samples. Nothing is stored.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.api.checks.problems import server_problems
from app.api.checks.refusal import Problem, problem
from app.api.checks.rewards import entry_problems
from app.api.deps import SessionDep, SettingsDep, WriteAccess
from app.api.errors import ApiError
from app.api.responses import WRITES, errors
from app.api.reward_trials import MEMORY_MB, Scored, run_scoring, server_paths
from grpo.data.records import RecordError, parse_record
from grpo.rewards.registry import kind_of
from grpo.rewards.trial_report import (
    MAX_COMPLETION_CHARS,
    Failure,
    Finding,
    PreflightIn,
    PreflightReport,
    ProbeResult,
    RewardTestIn,
    RewardTestReport,
    SampleResult,
    ScoringJob,
)

router = APIRouter(prefix="/api/rewards", tags=["rewards"], responses=errors(*WRITES, 429))


@router.post("/test", dependencies=[WriteAccess])
def try_rewards(body: RewardTestIn, settings: SettingsDep) -> RewardTestReport:
    """Each sample scored by each reward on its own: its score (null where it failed or
    does not apply), its seconds, and each failure with its kind and message."""
    problems = entry_problems(body.rewards, settings, prefix="rewards")
    problems += answer_problems(body) + sample_problems(body)
    refuse_request(problems)
    job = ScoringJob(
        server=server_paths(settings),
        call_seconds=body.timeout_s,
        memory_mb=MEMORY_MB,
        rewards=body.rewards,
        samples=body.samples,
        answer_field=body.answer_field,
    )
    scored = run_scoring(job)
    results = [SampleResult.model_validate(line) for line in scored.lines]
    labels = [entry.label for entry in body.rewards]
    results += [unreached(labels, scored)] * (len(body.samples) - len(results))
    return RewardTestReport(results=results)


@router.post("/preflight", dependencies=[WriteAccess])
def preflight(body: PreflightIn, settings: SettingsDep, session: SessionDep) -> PreflightReport:
    """The spec's rewards on adversarial completions of its first records beside a correct
    one; the findings name each probe a function pays as well as the correct completion."""
    problems = server_problems(body.spec, settings, session)
    refuse_request([problem(f"spec.{p['loc']}", p["message"]) for p in problems])
    job = ScoringJob(
        server=server_paths(settings),
        call_seconds=body.timeout_s,
        memory_mb=MEMORY_MB,
        spec=body.spec,
        records=body.records,
    )
    scored = run_scoring(job)
    for line in scored.lines:
        if "error" in line:
            refuse_request([problem("spec.data", f"its records do not load: {line['error']}")])
    probes = [ProbeResult.model_validate(line) for line in scored.lines if "probe" in line]
    said = [line for line in scored.lines if "findings" in line] or [{"findings": [], "records": 0}]
    found: list[Any] = list(said[-1]["findings"])  # type: ignore[call-overload]
    records = int(said[-1]["records"])  # type: ignore[call-overload]
    return PreflightReport(
        records=records,
        probes=[p for p in probes if p.record < records],
        findings=[Finding.model_validate(f) for f in found],
        stopped=None if scored.stopped is None else f"{scored.stopped}: {scored.why}",
    )


def answer_problems(body: RewardTestIn) -> list[Problem]:
    """Entries that compare with a reference answer when the samples have no answer column."""
    if body.answer_field is not None:
        return []
    return [
        problem(f"rewards.{i}", f"reward {entry.name!r} needs a reference answer: set answer_field")
        for i, entry in enumerate(body.rewards)
        if kind_of(entry).needs_answer
    ]


def sample_problems(body: RewardTestIn) -> list[Problem]:
    """Each sample as a worker reads a record (grpo/data/records.py), with its completion."""
    found = []
    for i, sample in enumerate(body.samples):
        completion = sample.get("completion")
        if not isinstance(completion, str):
            found.append(problem(f"samples.{i}.completion", "required, a string"))
        elif len(completion) > MAX_COMPLETION_CHARS:
            why = f"{len(completion):,} characters, over the limit of {MAX_COMPLETION_CHARS:,}"
            found.append(problem(f"samples.{i}.completion", why))
        tokens = sample.get("num_tokens")
        if tokens is not None and (not isinstance(tokens, int) or tokens < 0):
            found.append(problem(f"samples.{i}.num_tokens", "a whole number of tokens, >= 0"))
        columns = {k: v for k, v in sample.items() if k not in ("completion", "num_tokens")}
        try:
            parse_record(
                columns, prompt_field="prompt", answer_field=body.answer_field, where=f"samples.{i}"
            )
        except RecordError as exc:
            found.append(problem(f"samples.{i}", str(exc).removeprefix(f"samples.{i}: ")))
    return found


def unreached(labels: list[str], scored: Scored) -> SampleResult:
    """A sample the scoring process did not reach: every function failed the way it stopped."""
    kind = scored.stopped or "runtime_error"
    return SampleResult(
        scores={label: None for label in labels},
        seconds={},
        failures=[Failure(label=label, kind=kind, message=scored.why) for label in labels],
    )


def refuse_request(problems: list[Problem]) -> None:
    """A 422 listing every problem, each naming its field."""
    if problems:
        summary = "; ".join(f"{p['loc']}: {p['message']}" for p in problems[:5])
        raise ApiError(422, "validation_error", f"invalid request: {summary}", problems)
