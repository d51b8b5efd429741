"""What a reward test and a preflight are asked and answer, and the job the scoring process
is handed.

POST /api/rewards/test takes a RewardTestIn, POST /api/rewards/preflight a PreflightIn; the
API validates the scoring process's answer with the models here and answers them as they
are; the CLI prints them. Pydantic only: imports without torch. Knows nothing of how the
rewards are scored.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from grpo.rewards.failure_kinds import FailureKind
from grpo.spec import JobSpec
from grpo.spec.json_values import JsonObject
from grpo.spec.rewards import RewardSpec, check_reward_entries

ANSWER = ConfigDict(frozen=True, use_attribute_docstrings=True)
ASKED = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
MAX_SAMPLES = 32
"""Samples one reward test scores."""
MAX_COMPLETION_CHARS = 100_000
"""Characters of one sample's completion."""
MAX_PREFLIGHT_RECORDS = 8
"""Records one preflight probes (each gets up to ten probe completions)."""
MAX_CALL_SECONDS = 60.0
"""The most `timeout_s` may give one function on one sample."""


class RewardTestIn(BaseModel):
    """Reward entries as in a JobSpec, and samples to score with them."""

    model_config = ASKED
    rewards: tuple[RewardSpec, ...] = Field(min_length=1, max_length=16)
    """The entries, exactly as a JobSpec's `rewards` (labels unique)."""
    samples: list[JsonObject] = Field(min_length=1, max_length=MAX_SAMPLES)
    """Each `{"prompt": ..., "completion": "...", <record columns>}`; an optional integer
    `num_tokens` is the completion's length in tokens (else about 4 characters a token)."""
    answer_field: str | None = Field("answer", min_length=1, max_length=100)
    """The samples' reference-answer column, as a spec's `data.answer_field`."""
    timeout_s: float = Field(10.0, gt=0, le=MAX_CALL_SECONDS)
    """Seconds one function may take on one sample; past it, a `timeout` failure."""

    @field_validator("rewards")
    @classmethod
    def _labels_unique(cls, rewards: tuple[RewardSpec, ...]) -> tuple[RewardSpec, ...]:
        return check_reward_entries(rewards)


class PreflightIn(BaseModel):
    """A spec whose rewards to probe on its first records."""

    model_config = ASKED
    spec: JobSpec
    records: int = Field(4, ge=1, le=MAX_PREFLIGHT_RECORDS)
    """How many of the dataset's first records to build probes from."""
    timeout_s: float = Field(10.0, gt=0, le=MAX_CALL_SECONDS)
    """Seconds one function may take on one probe."""


class Failure(BaseModel):
    model_config = ANSWER
    label: str
    """The reward entry that failed."""
    kind: FailureKind
    """Which way it failed, one of a fixed list (grpo/rewards/failure_kinds.py)."""
    message: str


class SampleResult(BaseModel):
    """One sample's scores, each function on its own."""

    model_config = ANSWER
    scores: dict[str, float | None]
    """Unweighted score per reward label; null where the function failed or does not apply."""
    seconds: dict[str, float]
    """How long each function took on this sample."""
    failures: list[Failure] = []
    notes: dict[str, str] = {}
    """What a function said about the completion (a sandbox limit it hit), by label."""


class RewardTestReport(BaseModel):
    model_config = ANSWER
    results: list[SampleResult]
    """One per sample, in the order given."""


Probe = Literal[
    "correct",
    "empty",
    "whitespace",
    "answer_only",
    "format_wrong_answer",
    "prompt_echo",
    "answer_repeated",
    "truncated",
    "very_long",
    "judge_injection",
]
PROBES: tuple[Probe, ...] = get_args(Probe)
"""Each probe is a kind of completion (grpo/rewards/probes.py); `correct` is the yardstick."""


class ProbeResult(BaseModel):
    """One probe completion of one record, scored by every reward of the spec."""

    model_config = ANSWER
    record: int
    """Which of the records probed (0-based, in the dataset's order)."""
    answer: str = ""
    """The record's reference answer ("" where it has none)."""
    probe: Probe
    completion: str
    result: SampleResult


TOTAL = "(total)"
"""The label of a finding on the weighted total (no reward label has parentheses)."""


class Finding(BaseModel):
    """A probe that scores at or above the correct completion on one function, or that
    makes it fail."""

    model_config = ANSWER
    label: str
    probe: Probe
    score: float | None
    """The probe's mean score on `label` over the records probed (null: it failed)."""
    correct_score: float | None
    """The correct completion's mean score on `label` (null: the records have no answer)."""
    message: str


class PreflightReport(BaseModel):
    model_config = ANSWER
    records: int
    """Records probed."""
    probes: list[ProbeResult]
    findings: list[Finding]
    """Holes found; empty when no probe scores at or above a correct completion."""
    stopped: str | None = None
    """Why it stopped before probing every record asked for (its time limit); the findings
    are those of the records probed."""


class ServerPaths(BaseModel):
    """What the scoring process is allowed, from the server's settings: as a worker's."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    reward_hosts: tuple[str, ...] = ()
    token_envs: tuple[str, ...] = ()
    plugin_dirs: tuple[str, ...] = ()
    cache_dir: str
    datasets_dir: str | None = None
    local_path_base: str
    model_roots: tuple[str, ...] = ()
    data_roots: tuple[str, ...] = ()


class ScoringJob(BaseModel):
    """What the API hands the scoring process (grpo/rewards/trial_process.py) on stdin:
    samples to score with `rewards`, or a spec whose first `records` records to probe."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    server: ServerPaths
    call_seconds: float = Field(gt=0)
    """Seconds one function may take on one sample."""
    memory_mb: int = Field(ge=64)
    """Address space the scoring process may hold."""
    rewards: tuple[RewardSpec, ...] = ()
    samples: list[dict[str, Any]] = []
    answer_field: str | None = "answer"
    spec: JobSpec | None = None
    records: int = 0
