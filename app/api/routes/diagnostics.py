"""The run doctor's findings of a run (grpo/doctor/): what is going wrong, the evidence,
and the spec change to try.

A run is diagnosed live by its worker; a run stored before (or diagnosed by older rules)
is diagnosed from its stored steps on the first read, which also sends its findings as
`diagnosis` events on the run's stream.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import ReadAccess, RunDep, SessionDep
from app.api.responses import errors
from app.store import findings
from grpo.doctor import RULES_VERSION, Severity

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


class EvidenceOut(BaseModel):
    metric: str
    """The metric whose curve shows the finding."""
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
    items: list[FindingOut]


@router.get("/{run_id}/diagnostics")
def get_diagnostics(run: RunDep, session: SessionDep) -> DiagnosisOut:
    """The run doctor's findings, by the step each opened: open ones while their condition
    holds, resolved ones after. See docs/how-to/doctor.md for the rules."""
    findings.diagnose_stored(session, run.id)
    step, items = findings.list_findings(session, run.id)
    return DiagnosisOut(
        step=step,
        rules_version=RULES_VERSION,
        items=[FindingOut.model_validate(item) for item in items],
    )
