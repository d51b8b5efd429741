"""Specs before they are runs: a TRL GRPOConfig YAML in, the equivalent JobSpec out
(grpo/spec/trl_config.py), with every field that could not be mapped and why; and a spec's
check, every problem POST /api/runs would refuse it for (the new-run page checks as you
type with it).

A conversion stores nothing but costs the server work, so it takes a token whenever tokens
are configured (any role, as the recipe page of a viewer converts too). The YAML is read by
the one rule for user YAML (grpo/spec/yaml_input.py: no anchors or aliases, bounded depth),
and the answer is bounded: an input that would convert to more than `MAX_ANSWER_CHARS` is a
422, not a large body."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.checks.problems import spec_problems
from app.api.checks.warnings import spec_warnings
from app.api.deps import SessionDep, SettingsDep, TokenAccess
from app.api.errors import ApiError
from app.api.responses import WRITES, FieldError, errors
from app.api.schemas import TrlConfigIn, TrlConversionOut
from grpo.spec.trl_config import convert, spec_yaml
from grpo.spec.yaml_input import YamlRefused, load_yaml

router = APIRouter(prefix="/api/specs", tags=["specs"])

MAX_ANSWER_CHARS = 1_000_000
"""The most a conversion answers (its YAML; the spec as JSON is of the same size)."""


@router.post("/convert", dependencies=[TokenAccess])
def convert_trl_config(body: TrlConfigIn) -> TrlConversionOut:
    """The JobSpec of a GRPOConfig or AsyncGRPOConfig YAML (`config_class`; the script
    arguments of public recipes too: model_name_or_path, dataset_name, dataset_config,
    dataset_prompt_column, system_prompt, reward_funcs, reward_weights); nothing is stored
    or run."""
    try:
        config = load_yaml(body.config, source="config")
    except YamlRefused as exc:
        raise _bad("config", str(exc).removeprefix("config: ")) from None
    if not isinstance(config, dict):
        raise _bad("config", "expected a mapping of GRPOConfig fields")
    try:
        is_async = None if body.config_class is None else body.config_class == "AsyncGRPOConfig"
        conversion = convert(config, processes=body.processes, is_async=is_async)
    except ValueError as exc:
        raise _bad("config", str(exc)) from exc
    text = spec_yaml(conversion)
    if len(text) > MAX_ANSWER_CHARS:
        raise _bad(
            "config", f"converts to {len(text):,} characters, more than {MAX_ANSWER_CHARS:,}"
        )
    return TrlConversionOut(spec=conversion.spec, unmapped=conversion.unmapped, yaml=text)


class SpecCheckOut(BaseModel):
    problems: list[FieldError]
    """Every problem POST /api/runs would refuse the spec for, each naming its field (the
    JobSpec's rules' and this server's: paths, datasets, rewards, tools, trackers); empty:
    the spec would be accepted."""
    warnings: list[FieldError] = []
    """What submit accepts but that will not go as meant, each naming its field (a model
    with random weights, which cannot learn); never a reason to refuse the spec."""


@router.post("/check", dependencies=[TokenAccess], responses=errors(*WRITES))
def check_spec_problems(
    spec: dict[str, Any], settings: SettingsDep, session: SessionDep
) -> SpecCheckOut:
    """The problems of a spec, all of them, as submit would answer them; nothing is stored
    or run, and what it warns of (`warnings`: submit accepts those). 200 either way: the
    check worked, whatever it found."""
    problems = spec_problems(spec, settings, session)
    return SpecCheckOut(
        problems=[FieldError.model_validate(p) for p in problems],
        warnings=[FieldError.model_validate(w) for w in spec_warnings(spec)],
    )


def _bad(loc: str, message: str) -> ApiError:
    fields = [{"loc": loc, "message": message}]
    return ApiError(422, "validation_error", f"{loc}: {message}", fields)
