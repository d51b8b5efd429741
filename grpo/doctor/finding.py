"""What the doctor says about a run: a finding, its evidence and its suggested change.

Plain frozen dataclasses of numbers and strings, turned into the JSON the store keeps, the
API serves and the `diagnosis` events carry (`as_dict`). Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

JsonValue = bool | int | float | str | list[Any] | dict[str, Any] | None


class Severity(StrEnum):
    """How loud a finding is: `info` is worth knowing, `warning` costs the run something,
    `critical` means the run is wasting its steps or getting worse."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return SEVERITY_ORDER.index(self)


SEVERITY_ORDER = (Severity.INFO, Severity.WARNING, Severity.CRITICAL)

FindingStatus = Literal["open", "resolved"]
"""`open` while its condition holds (or held within the last few steps), then `resolved`."""


@dataclass(frozen=True)
class Suggestion:
    """One change to the spec: `field` is a JobSpec field's dotted path (`learning_rate`,
    `dynamic_sampling.enabled`), `value` what to set it to; `reason` says why in a clause."""

    field: str
    value: JsonValue
    reason: str


@dataclass(frozen=True)
class GroupRef:
    """A group behind a finding (the dashboard links /runs/{id}/steps/{step}/groups/{index})."""

    step: int
    index: int
    note: str
    """What it shows, e.g. `all 8 rewards 1.0`."""


@dataclass(frozen=True)
class CompletionRef:
    """A completion behind a finding, with what it scored and the answer it was held to."""

    step: int
    group: int
    text: str
    reward: float
    rewards: dict[str, float | None]
    answer: str
    note: str = ""
    """What it is where the run did not sample it (a preflight's probe: `probe empty`)."""


@dataclass(frozen=True)
class ExampleQuery:
    """Which of a step's groups illustrate a verdict; grpo/doctor/examples.py picks them."""

    kind: Literal["zero_std", "truncated", "high_reward_fail"]
    step: int


@dataclass(frozen=True)
class Verdict:
    """A detector's word that its condition holds at a step (see grpo/doctor/rule.py)."""

    severity: Severity
    message: str
    """One sentence with the numbers, e.g. `92% of groups had all-equal rewards ...`."""
    metric: str
    """The metric whose curve is the evidence (the card's sparkline)."""
    facts: dict[str, float]
    suggestions: tuple[Suggestion, ...]
    examples: ExampleQuery | None = None


@dataclass(frozen=True)
class Evidence:
    metric: str
    values: list[tuple[int, float]]
    """(step, value) of `metric` over the steps before the finding was last written."""
    facts: dict[str, float]
    groups: list[GroupRef] = field(default_factory=list)
    completions: list[CompletionRef] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    """One episode of one rule: from the step its condition first held to the last."""

    rule: str
    title: str
    severity: Severity
    status: FindingStatus
    first_step: int
    last_step: int
    message: str
    evidence: Evidence
    suggestions: tuple[Suggestion, ...]
    examples: ExampleQuery | None = None
    """Where its example groups are to be picked from; None once they are."""
    subject: str = ""
    """What it is about where a rule finds several things at once (the preflight's
    `rewards.<i>.<probe>`: grpo/doctor/preflight.py); part of its id."""

    @property
    def id(self) -> str:
        """Stable across rewrites of the same episode: the rule (and subject) and the step it
        opened."""
        about = f":{self.subject}" if self.subject else ""
        return f"{self.rule}{about}@{self.first_step}"

    def as_dict(self) -> dict[str, Any]:
        """The finding as stored and served (without `examples`, an instruction to the writer)."""
        data = asdict(self)
        del data["examples"], data["subject"]
        data["id"] = self.id
        data["severity"] = str(self.severity)
        # JSON has no NaN or infinity: a fact or a point that is not finite is left out
        data["evidence"]["values"] = [[s, v] for s, v in self.evidence.values if math.isfinite(v)]
        data["evidence"]["facts"] = {
            k: v for k, v in self.evidence.facts.items() if math.isfinite(v)
        }
        data["suggestions"] = [asdict(s) for s in self.suggestions]
        return data
