"""Every problem of a spec at once (issue 44): submit, clone and the new-run page's live
check (POST /api/specs/check) answer with all of them, each naming its field, rather than
with those of the first stage that finds any.

The stages: the JobSpec's own rules (pydantic, worded by grpo/spec/hints.py), then this
server's (spec.py: paths, datasets, NUL characters, the system prompt; rewards.py; tools.py;
trackers.py; engine.py; nodes.py). The server's need a spec that validates: when the JobSpec's
rules refuse some top-level fields, the server's checks run on the spec without them (their
defaults in their place) and report what they find in the other fields, so that a TRL field
name does not hide an uninstalled reward function until it is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from app.api.checks.engine import engine_problems
from app.api.checks.nodes import node_problems
from app.api.checks.refusal import Problem
from app.api.checks.rewards import reward_problems
from app.api.checks.spec import path_problems
from app.api.checks.tools import tool_problems
from app.api.checks.trackers import tracker_problems
from app.settings import Settings
from app.store.db import Session
from grpo.spec import JobSpec
from grpo.spec.hints import worded_errors


def server_problems(spec: JobSpec, settings: Settings, session: Session) -> list[Problem]:
    """What this server refuses in a spec that validates, every stage's."""
    return [
        *path_problems(spec, settings, session),
        *reward_problems(spec, settings),
        *tool_problems(spec, settings),
        *tracker_problems(spec),
        *engine_problems(spec, settings),
        *node_problems(spec, session),
    ]


def spec_problems(data: object, settings: Settings, session: Session) -> list[Problem]:
    """Everything submit refuses in `data` (a spec as JSON): the JobSpec's rules' problems,
    then the server's of the fields those rules accept."""
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        found = worded_errors(errors, JobSpec)
        refused = {str(e["loc"][0]) for e in errors if e["loc"]}
        rest = _without(data, refused) if all(e["loc"] for e in errors) else None
        if rest is None:  # a rule of the whole spec, or the rest alone breaks one
            return found
        more = server_problems(rest, settings, session)
        return found + [p for p in more if p["loc"].split(".")[0] not in refused]
    return server_problems(spec, settings, session)


def _without(data: object, refused: set[str]) -> JobSpec | None:
    """The spec without the top-level fields refused, if it validates so."""
    if not isinstance(data, Mapping):
        return None
    rest: dict[str, Any] = {k: v for k, v in data.items() if k not in refused}
    try:
        return JobSpec.model_validate(rest)
    except ValidationError:
        return None
