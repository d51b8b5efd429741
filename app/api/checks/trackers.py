"""A run that asks for a tracker (`logging.report_to`) whose package is not installed is a
422 at submit naming the package, checked with importlib.util.find_spec: the API never
imports a tracker (or torch) itself."""

from __future__ import annotations

import importlib.util

from app.api.checks.refusal import Problem, problem, refuse
from grpo.spec import JobSpec
from grpo.spec.logging import TRACKER_PACKAGES


def check_trackers(spec: JobSpec) -> None:
    refuse(tracker_problems(spec))


def tracker_problems(spec: JobSpec) -> list[Problem]:
    found = []
    for tracker in spec.logging.report_to:
        package = TRACKER_PACKAGES[tracker]
        if importlib.util.find_spec(package) is None:
            message = (
                f"{tracker} needs the {package!r} package, which is not installed: "
                "pip install 'grpo-service[trackers]'"
            )
            found.append(problem("logging.report_to", message))
    return found
