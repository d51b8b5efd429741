"""The `logging` section of a JobSpec: what is kept of each step beyond its scalars, and
which trackers also get them. Pydantic only, imports without torch; grpo/report/trackers.py
writes to the trackers."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from grpo.spec.config import SECTION_CONFIG, SpecInt

TRACKER_PACKAGES = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}
"""The package each `logging.report_to` tracker needs (the `trackers` extra); the API checks
it is importable at submit, without importing it."""


def missing_trackers(report_to: Sequence[str]) -> list[str]:
    """What each tracker of `logging.report_to` whose package is not installed needs, in a
    line (found with importlib.util.find_spec: nothing is imported). The API refuses such a
    spec at submit, every door of a run (grpo/run/run.py) before loading anything."""
    return [
        f"{tracker} needs the {package!r} package, which is not installed: "
        "pip install 'grpo-service[trackers]'"
        for tracker in report_to
        if importlib.util.find_spec(package := TRACKER_PACKAGES[tracker]) is None
    ]


class LoggingSpec(BaseModel):
    """What is kept of each step beyond its scalars."""

    model_config = SECTION_CONFIG
    max_groups_per_step: SpecInt = Field(16, ge=0, le=4096)
    """Groups per step whose completion texts are kept (all group stats are always kept)."""
    pass_threshold: float = Field(1.0, ge=-1e6, le=1e6)
    """Total reward at which a completion passes when no accuracy-like reward (`accuracy`,
    `exact_match`, `code`) decides: groups are all_pass, all_fail or mixed by it."""
    report_to: tuple[Literal["tensorboard", "mlflow", "wandb"], ...] = ()
    """Trackers that also get every step's scalars, histograms and eval metrics (our store
    stays the source of truth): `tensorboard` writes event files under the run's directory
    (`tensorboard/`); `mlflow` logs scalars and eval metrics to the operator's tracking URI
    (`GRPO_MLFLOW_URI`; default a SQLite store in the run's directory), histograms not;
    `wandb` logs all three to Weights & Biases as the worker's W&B is configured (online, or
    `WANDB_MODE=offline`), files under the run's directory (`wandb/`).
    TRL's `report_to` names. Needs the `trackers` extra. See grpo/report/trackers.py."""
