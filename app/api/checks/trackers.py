"""A run that asks for a tracker (`logging.report_to`) whose package is not installed is a
422 at submit naming the package, checked with importlib.util.find_spec: the API never
imports a tracker (or torch) itself."""

from __future__ import annotations

from app.api.checks.refusal import Problem, problem, refuse
from grpo.spec import JobSpec
from grpo.spec.logging import missing_trackers


def check_trackers(spec: JobSpec) -> None:
    refuse(tracker_problems(spec))


def tracker_problems(spec: JobSpec) -> list[Problem]:
    return [problem("logging.report_to", m) for m in missing_trackers(spec.logging.report_to)]
