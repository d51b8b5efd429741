"""Every rule the doctor runs, found by id; adding one is a detector in its family's module
and one entry here. Knows nothing of torch, HTTP or SQL."""

from __future__ import annotations

from grpo.doctor.asynchrony import GENERATOR_STARVED, LOGPROB_GAP, TRAINER_STARVED
from grpo.doctor.exploration import ENTROPY_COLLAPSE
from grpo.doctor.hacking import REWARD_HACKING
from grpo.doctor.length import LENGTH_DRIFT, TRUNCATION
from grpo.doctor.resources import GENERATION_BOUND, MEMORY_PRESSURE
from grpo.doctor.rule import Rule
from grpo.doctor.signal import NO_SIGNAL, REWARD_SCALE
from grpo.doctor.stability import CLIP_RATIO, GRAD_NORM_SPIKE, KL_RUNAWAY

RULES: tuple[Rule, ...] = (
    NO_SIGNAL,
    REWARD_SCALE,
    ENTROPY_COLLAPSE,
    KL_RUNAWAY,
    CLIP_RATIO,
    GRAD_NORM_SPIKE,
    TRUNCATION,
    LENGTH_DRIFT,
    REWARD_HACKING,
    GENERATION_BOUND,
    MEMORY_PRESSURE,
    TRAINER_STARVED,
    GENERATOR_STARVED,
    LOGPROB_GAP,
)
RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
RULES_VERSION = 2
"""Raised whenever a rule or a threshold changes: a run diagnosed by an older version is
diagnosed again from its stored steps when its findings are next read."""
