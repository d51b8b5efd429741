"""The run doctor: rules over a run's metric series that say what is going wrong, show the
evidence and suggest the spec change (docs/how-to/doctor.md). Torch-free: the API and the worker
both run it. Knows nothing of HTTP or SQL."""

from grpo.doctor.doctor import Doctor, diagnose
from grpo.doctor.examples import CompletionView, GroupView, pick_examples
from grpo.doctor.finding import Finding, Severity, Suggestion
from grpo.doctor.registry import RULES, RULES_BY_ID, RULES_VERSION
from grpo.doctor.state import doctor_from, state_of

__all__ = [
    "RULES",
    "RULES_BY_ID",
    "RULES_VERSION",
    "CompletionView",
    "Doctor",
    "Finding",
    "GroupView",
    "Severity",
    "Suggestion",
    "diagnose",
    "doctor_from",
    "pick_examples",
    "state_of",
]
