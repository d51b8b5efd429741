"""Spec conversions: a TRL GRPOConfig YAML in, the equivalent JobSpec out
(grpo/spec/trl_config.py), with every field that could not be mapped and why."""

from __future__ import annotations

import yaml
from fastapi import APIRouter

from app.api.errors import ApiError
from app.api.schemas import TrlConfigIn, TrlConversionOut
from grpo.spec.trl_config import convert, spec_yaml

router = APIRouter(prefix="/api/specs", tags=["specs"])


@router.post("/convert")
def convert_trl_config(body: TrlConfigIn) -> TrlConversionOut:
    """The JobSpec of a GRPOConfig YAML (the script arguments of public recipes too:
    model_name_or_path, dataset_name, dataset_config, dataset_prompt_column, system_prompt,
    reward_funcs, reward_weights); nothing is stored or run."""
    try:
        config = yaml.safe_load(body.config)
    except (yaml.YAMLError, RecursionError) as exc:
        raise _bad("config", f"not YAML: {exc}"[:500]) from exc
    if not isinstance(config, dict):
        raise _bad("config", "expected a mapping of GRPOConfig fields")
    try:
        conversion = convert(config, processes=body.processes)
    except ValueError as exc:
        raise _bad("config", str(exc)) from exc
    return TrlConversionOut(
        spec=conversion.spec, unmapped=conversion.unmapped, yaml=spec_yaml(conversion)
    )


def _bad(loc: str, message: str) -> ApiError:
    fields = [{"loc": loc, "message": message}]
    return ApiError(422, "validation_error", f"{loc}: {message}", fields)
