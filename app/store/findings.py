"""The run doctor's findings: written as the worker diagnoses each step, or all at once for a
run stored before (or by older rules), each with a `diagnosis` event on the run's log.

A finding is one row per episode (`<rule>@<first step>`), rewritten as it grows; the
groups and completions behind it are picked from the stored groups of the step its
verdict names (grpo/doctor/examples.py) inside the same transaction, so a step's own
groups, written just before, are there.

A stored run is diagnosed a stretch of STRETCH_STEPS steps at a time: each stretch restores
the doctor the last one saved on the run's diagnosis row (grpo/doctor/state.py), feeds it
the next steps, writes what changed and saves it again. So a read costs one stretch however
long the run, and the findings once every stretch is done are those of one pass over all
the steps. A saved doctor is trusted only while the steps it read are as it read them: a
rewritten step (a resumed run replays it, steps.py) drops it, and the count of the steps it
read is checked before each stretch. Knows nothing of HTTP or torch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sqlalchemy import ColumnElement, delete, func, or_, select, update
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.events import lock_run_events
from app.store.lease import Lease, hold
from app.store.models import (
    Diagnosis,
    Event,
    Run,
    RunStatus,
    Sample,
    StepGroup,
    StepMetric,
    utcnow,
)
from app.store.models import Finding as FindingRow
from app.store.steps import list_metrics, save_step
from grpo.doctor import (
    RULES_BY_ID,
    RULES_VERSION,
    CompletionView,
    Doctor,
    Finding,
    GroupView,
    Severity,
    doctor_from,
    pick_examples,
    state_of,
)
from grpo.report import StepReport
from grpo.spec import JobSpec

MARKED = (Severity.WARNING, Severity.CRITICAL)
"""Severities that mark a run in the runs list (an open `info` finding does not)."""
STRETCH_STEPS = 2_000
"""Stored steps one call of `diagnose_stored` reads (about 0.2 s of the doctor's work on
a 2-core VM, bench/long_run.py); a longer run is diagnosed over several calls."""


def _record(
    session: Session,
    run_id: str,
    findings: Sequence[Finding],
    *,
    spec: JobSpec,
    step: int,
    withdraw: tuple[int, int | None] | None = None,
) -> None:
    """Upsert `findings` and note the run diagnosed through `step`, in the caller's
    transaction (which holds the run's event lock). `withdraw` (after, through): every
    finding that opened after `after` (and by `through`, unless None) is among `findings`;
    any other stored one opened then is withdrawn."""
    keys = [f.id for f in findings]
    conditions: list[ColumnElement[bool]] = [FindingRow.key.in_(keys)] if keys else []
    if withdraw is not None:
        after, through = withdraw
        # the series' findings only: the preflight's (grpo/doctor/preflight.py) are no rule's
        opened = (FindingRow.first_step > after) & FindingRow.rule.in_(list(RULES_BY_ID))
        if through is not None:
            opened &= FindingRow.first_step <= through
        conditions.append(opened)
    stored: dict[str, FindingRow] = {}
    if conditions:
        query = select(FindingRow).where(FindingRow.run_id == run_id, or_(*conditions))
        stored = {row.key: row for row in session.scalars(query)}
    for finding in findings:
        body = _with_examples(session, run_id, finding, spec, stored.get(finding.id))
        row = stored.get(finding.id)
        if row is not None and row.body == body:
            continue
        _write(session, run_id, finding, body, row)
    if withdraw is not None:
        after, through = withdraw
        for key in stored.keys() - set(keys):
            row = stored[key]
            if row.first_step > after and (through is None or row.first_step <= through):
                session.execute(delete(FindingRow).where(FindingRow.id == row.id))
                _event(session, run_id, {"id": key, "status": "withdrawn"}, row.last_step)
    _mark_diagnosed(session, run_id, step)


def _write(
    session: Session, run_id: str, finding: Finding, body: dict[str, Any], row: FindingRow | None
) -> None:
    columns = {
        "rule": finding.rule,
        "severity": str(finding.severity),
        "status": finding.status,
        "first_step": finding.first_step,
        "last_step": finding.last_step,
        "body": body,
        "updated_at": utcnow(),
    }
    if row is None:
        session.add(FindingRow(run_id=run_id, key=finding.id, **columns))
    else:
        session.execute(update(FindingRow).where(FindingRow.id == row.id).values(**columns))
    _event(session, run_id, body, finding.last_step)


def _event(session: Session, run_id: str, payload: dict[str, Any], step: int) -> None:
    session.add(Event(run_id=run_id, kind="diagnosis", step=step, payload=payload))


def _with_examples(
    session: Session, run_id: str, finding: Finding, spec: JobSpec, row: FindingRow | None
) -> dict[str, Any]:
    """The finding's body with its example groups: picked now where its verdict names a step,
    else those it was written with before."""
    body = finding.as_dict()
    evidence = body["evidence"]
    if finding.examples is not None:
        groups = _step_groups(session, run_id, finding.examples.step)
        picked_groups, picked_completions = pick_examples(finding.examples, groups, spec)
        evidence["groups"] = [asdict(g) for g in picked_groups]
        evidence["completions"] = [asdict(c) for c in picked_completions]
    elif row is not None:
        evidence["groups"] = row.body["evidence"].get("groups", [])
        evidence["completions"] = row.body["evidence"].get("completions", [])
    return body


def _step_groups(session: Session, run_id: str, step: int) -> list[GroupView]:
    """One step's stored groups, with the completions of those whose texts were kept."""
    groups = session.scalars(
        select(StepGroup)
        .where(StepGroup.run_id == run_id, StepGroup.step == step)
        .order_by(StepGroup.index)
    ).all()
    rows = session.execute(
        select(Sample.group_index, Sample.completions).where(
            Sample.run_id == run_id, Sample.step == step
        )
    )
    samples: dict[int, list[dict[str, Any]]] = {row[0]: row[1] for row in rows}
    return [
        GroupView(
            index=g.index,
            answer=g.answer,
            rewards=g.rewards,
            is_dropped=g.is_dropped,
            completions=[
                CompletionView(c["text"], c["reward"], c["rewards"], c["is_truncated"])
                for c in samples[g.index]
            ]
            if g.index in samples
            else None,
        )
        for g in groups
    ]


def _mark_diagnosed(session: Session, run_id: str, step: int) -> None:
    values = {"step": step, "rules_version": RULES_VERSION, "updated_at": utcnow()}
    result = session.execute(update(Diagnosis).where(Diagnosis.run_id == run_id).values(**values))
    if result.rowcount == 0:  # type: ignore[attr-defined]
        session.add(Diagnosis(run_id=run_id, **values))


@unit
def diagnose_stored(session: Session, run_id: str, *, max_steps: int = STRETCH_STEPS) -> bool:
    """Diagnose the next `max_steps` stored steps of a run, unless a worker is diagnosing it
    live or its findings are current. True when nothing is left to diagnose: the findings
    cover every stored step (or cannot: no run, or a stored spec that no longer validates)."""
    run = session.get(Run, run_id)
    if run is None or not _is_stale(session, run):
        return True  # the common case, without a lock
    lock_run_events(session, run_id)
    session.refresh(run)
    if not _is_stale(session, run):
        return True
    try:
        spec = JobSpec.model_validate(run.spec)
    except ValueError:
        return True
    doctor, through, read = _resume(session, run_id, spec)
    rows = list_metrics(session.connection(), run_id, after_step=through, limit=max_steps + 1)
    is_done = len(rows) <= max_steps
    rows = rows[:max_steps]
    settled: list[Finding] = []
    for row in rows:
        doctor.observe(row["step"], row["metrics"])
        settled += doctor.settle()
    last = rows[-1]["step"] if rows else max(through, 0)
    found = [*settled, *doctor.findings()]
    _record(
        session, run_id, found, spec=spec, step=last, withdraw=(through, None if is_done else last)
    )
    saved = {"step": last, "rows": read + len(rows), "doctor": state_of(doctor)}
    session.execute(
        update(Diagnosis).where(Diagnosis.run_id == run_id).values(state=json.dumps(saved))
    )
    return is_done


def _resume(session: Session, run_id: str, spec: JobSpec) -> tuple[Doctor, int, int]:
    """The doctor the last stretch saved, the step it reached and how many steps it read; a
    new doctor before step 0 when none was saved, or the steps it read have changed since."""
    diagnosed = session.get(Diagnosis, run_id)
    if diagnosed is not None and diagnosed.state and diagnosed.rules_version == RULES_VERSION:
        saved = json.loads(diagnosed.state)
        count = select(func.count()).where(
            StepMetric.run_id == run_id, StepMetric.step <= saved["step"]
        )
        if session.scalar(count) == saved["rows"]:
            doctor = doctor_from(spec, saved["doctor"])
            if doctor is not None:
                return doctor, saved["step"], saved["rows"]
    return Doctor(spec), -1, 0


@unit
def is_diagnosed(session: Session, run_id: str) -> bool:
    """Whether the run's findings are current (or a worker keeps them so): no stretch left."""
    run = session.get(Run, run_id)
    return run is None or not _is_stale(session, run)


def _is_stale(session: Session, run: Run) -> bool:
    """Whether the run's findings lag its stored steps or its rules, and no worker is
    diagnosing it as it trains."""
    if run.status == RunStatus.RUNNING:
        return False
    diagnosed = session.get(Diagnosis, run.id, populate_existing=True)
    if diagnosed is None:
        return True
    if diagnosed.rules_version != RULES_VERSION:
        return True
    # the last stored step, not run.step: rows written without it (seeded, imported) count
    last = select(func.max(StepMetric.step)).where(StepMetric.run_id == run.id)
    return diagnosed.step < (session.scalar(last) or 0)


@unit
def list_findings(session: Session, run_id: str) -> tuple[int, list[dict[str, Any]]]:
    """(the step the run is diagnosed through, its findings by the step they opened)."""
    diagnosed = session.get(Diagnosis, run_id)
    rows = session.scalars(
        select(FindingRow.body)
        .where(FindingRow.run_id == run_id)
        .order_by(FindingRow.first_step, FindingRow.key)
    ).all()
    return (diagnosed.step if diagnosed else 0), list(rows)


@unit
def open_marks(session: Session, run_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Per run, its open findings at warning or above: (how many, the worst severity)."""
    if not run_ids:
        return {}
    rows = session.execute(
        select(FindingRow.run_id, FindingRow.severity, func.count())
        .where(
            FindingRow.status == "open",
            FindingRow.run_id.in_(run_ids),
            FindingRow.severity.in_([str(s) for s in MARKED]),
        )
        .group_by(FindingRow.run_id, FindingRow.severity)
    ).all()
    marks: dict[str, tuple[int, str]] = {}
    for run_id, severity, count in rows:
        total, worst = marks.get(run_id, (0, Severity.INFO))
        worse = max(Severity(worst), Severity(severity), key=lambda s: s.rank)
        marks[run_id] = (total + count, str(worse))
    return marks


@unit
def save_diagnosed_step(
    session: Session,
    run_id: str,
    report: StepReport,
    findings: Sequence[Finding],
    *,
    spec: JobSpec,
    is_full: bool,
    lease: Lease,
) -> None:
    """One step and what the doctor made of it, in one transaction under the worker's lease."""
    save_step(session, run_id, report, lease=lease)
    withdraw = (-1, None) if is_full else None
    _record(session, run_id, findings, spec=spec, step=report.step, withdraw=withdraw)


@unit
def save_preflight_findings(
    session: Session, run_id: str, found: Sequence[Finding], *, lease: Lease
) -> None:
    """The findings of the run's reward preflight (grpo/doctor/preflight.py), under the
    worker's lease, each written (with its `diagnosis` event) unless stored as it is. How far
    the run is diagnosed is left alone: they are not read from its steps."""
    hold(session, lease)
    if not found:
        return
    query = select(FindingRow).where(
        FindingRow.run_id == run_id, FindingRow.key.in_([f.id for f in found])
    )
    stored = {row.key: row for row in session.scalars(query)}
    for finding in found:
        body = finding.as_dict()
        row = stored.get(finding.id)
        if row is None or row.body != body:
            _write(session, run_id, finding, body, row)
