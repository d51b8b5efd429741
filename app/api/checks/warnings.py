"""What a spec's check warns of: things submit accepts but that will not go as the user
likely means, shown on the new-run page apart from the problems (issue 44). A warning
never refuses a spec; today, a model with random weights (grpo/spec/task.py), which the
run doctor could otherwise only say after the run, as groups that all fail alike."""

from __future__ import annotations

from collections.abc import Mapping

from app.api.checks.refusal import Problem, problem
from grpo.spec import model_warnings


def spec_warnings(data: object) -> list[Problem]:
    """The warnings of `data` (a spec as JSON, valid or not), each naming its field."""
    if not isinstance(data, Mapping):
        return []
    model = data.get("model")
    if not isinstance(model, str):
        return []
    return [problem("model", message) for message in model_warnings(model)]
