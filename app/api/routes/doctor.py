"""The run doctor's findings of a run (grpo/doctor/): what is going wrong, the evidence,
and the spec change to try.

A run is diagnosed live by its worker; a run stored before (or diagnosed by older rules)
is diagnosed from its stored steps when first read, which also sends its findings as
`diagnosis` events on the run's stream. A read diagnoses one stretch of steps
(app/store/findings.py) and answers; a longer run's remaining stretches are diagnosed
after the answer (CATCH_UPS runs at a time in this process; another run's go on a stretch
per read), and the answer says `is_current` false until they are done: a first read of a
100,000-step run costs what a later one does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from fastapi import APIRouter, BackgroundTasks
from pydantic import BaseModel

from app.api.deps import ReadAccess, RunDep, SessionDep
from app.api.responses import errors
from app.store import db, findings
from grpo.doctor import RULES_VERSION, Severity

log = logging.getLogger(__name__)

router = APIRouter(
    prefix="/api/runs", tags=["diagnostics"], dependencies=[ReadAccess], responses=errors(404)
)


class SuggestionOut(BaseModel):
    field: str
    """The spec field's dotted path, e.g. `learning_rate` or `dynamic_sampling.enabled`."""
    value: Any
    """What to set it to; null where the change is not one value (e.g. harder data)."""
    reason: str


class GroupRefOut(BaseModel):
    step: int
    index: int
    note: str


class CompletionRefOut(BaseModel):
    step: int
    group: int
    text: str
    reward: float
    rewards: dict[str, float | None]
    answer: str
    note: str = ""
    """What it is where the run did not sample it: a preflight probe's name and record (the
    `reward_hole` and `reward_fails` findings; `step` 0 and `group` the record there)."""


class EvidenceOut(BaseModel):
    metric: str
    """The metric whose curve shows the finding ("" for the reward preflight's, found before
    the first step)."""
    values: list[tuple[int, float]]
    """(step, value) of `metric` up to the finding's last step (the most recent ones)."""
    facts: dict[str, float]
    groups: list[GroupRefOut]
    completions: list[CompletionRefOut]


class FindingOut(BaseModel):
    id: str
    """`<rule>@<first step>`: the key `diagnosis` events carry."""
    rule: str
    title: str
    severity: Severity
    status: Literal["open", "resolved"]
    first_step: int
    last_step: int
    message: str
    evidence: EvidenceOut
    suggestions: list[SuggestionOut]


class DiagnosisOut(BaseModel):
    step: int
    """The last step the findings cover."""
    rules_version: int
    is_current: bool = True
    """False while the findings of a long stored run are still being caught up with its
    stored steps (after the answer, a stretch at a time): read again for the rest."""
    items: list[FindingOut]


CATCH_UPS = 1
"""Runs whose remaining stretches one API process diagnoses at once after answering, each on
a thread of the server's pool; another run's diagnosis goes on by a stretch per read until
one is free. One: the API's own answers keep most of the process."""
_catch_ups = threading.BoundedSemaphore(CATCH_UPS)
_diagnosing: set[str] = set()
_diagnosing_guard = threading.Lock()


@contextmanager
def diagnosing(run_id: str) -> Iterator[bool]:
    """Whether this thread may diagnose the run's stored steps now: one thread per run in
    this process (another process waits on the run's lock in the store)."""
    with _diagnosing_guard:
        is_mine = run_id not in _diagnosing
        _diagnosing.add(run_id)
    try:
        yield is_mine
    finally:
        if is_mine:
            with _diagnosing_guard:
                _diagnosing.discard(run_id)


def catch_up(run_id: str) -> None:
    """Diagnose the run's remaining stretches, each in a transaction of its own, if this
    process has a catch-up free (else the next read goes on)."""
    if not _catch_ups.acquire(blocking=False):
        return
    try:
        with diagnosing(run_id) as is_mine:
            while is_mine and not db.call(findings.diagnose_stored, run_id):
                pass
    except Exception:  # noqa: BLE001 - the next read carries on from the last stretch
        log.exception("run %s: diagnosing its stored steps failed", run_id)
    finally:
        _catch_ups.release()


@router.get("/{run_id}/diagnostics")
def get_diagnostics(run: RunDep, session: SessionDep, later: BackgroundTasks) -> DiagnosisOut:
    """The run doctor's findings, by the step each opened: open ones while their condition
    holds, resolved ones after. See docs/how-to/doctor.md for the rules."""
    with diagnosing(run.id) as is_mine:
        if is_mine:
            is_current = findings.diagnose_stored(session, run.id)
            if not is_current:
                later.add_task(catch_up, run.id)
        else:  # another thread is diagnosing it
            is_current = findings.is_diagnosed(session, run.id)
    step, items = findings.list_findings(session, run.id)
    return DiagnosisOut(
        step=step,
        rules_version=RULES_VERSION,
        is_current=is_current,
        items=[FindingOut.model_validate(item) for item in items],
    )
