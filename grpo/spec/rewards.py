"""Reward entries of a JobSpec: what each kind of reward function may be told.

Built-in rules (accuracy, format, length, exact_match, regex) and the programmable kinds:
`python` (an entry point installed on the workers, or a function of a plugin file), `http`
(an endpoint on an allowed host), `model` (a sequence classifier) and `code` (tests run in a
sandbox). Every entry has a `label`, unique in a spec, that keys its metrics and its
inspector column. Pydantic only: imports without torch. Knows nothing of HTTP servers, SQL
or Celery.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from grpo.spec.config import SECTION_CONFIG, SpecInt
from grpo.spec.endpoints import EndpointUrl
from grpo.spec.patterns import check_pattern
from grpo.spec.sources import parse_model_name
from grpo.spec.token_env import is_reserved_name, token_env_rule

DEFAULT_FORMAT_PATTERN = r"^<think>.*?</think>\s*<answer>.*?</answer>$"
LABEL_PATTERN = r"^[A-Za-z0-9_.\-]*$"
"""Labels become metric keys (`rewards/<label>/mean`): no slashes, no spaces."""
ENTRY_POINT_GROUP = "grpo.rewards"
"""Entry-point group of the reward functions a worker may call (`python` rewards)."""


class RewardEntry(BaseModel):
    """What every reward entry has: its kind, its label and its weight."""

    model_config = SECTION_CONFIG
    name: str
    label: str = Field("", max_length=64, pattern=LABEL_PATTERN)
    """Key of this function's metrics and inspector column, unique in a spec; default `name`."""
    weight: float = 1.0
    """Weight of this function in the total reward."""

    @model_validator(mode="before")
    @classmethod
    def _label_defaults_to_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("label"):
            return {**data, "label": data.get("name", cls.model_fields["name"].default)}
        return data


class AccuracyReward(RewardEntry):
    """1 when the completion's final answer equals the reference answer, else 0."""

    name: Literal["accuracy"] = "accuracy"
    extract: Literal["auto", "answer_tag", "boxed", "last_number"] = "auto"
    """Where the answer is read: `auto` tries <answer>, then \\boxed{}, then the last number."""
    compare: Literal["numeric", "symbolic", "string"] = "numeric"
    """How the extracted answer is compared to the reference."""
    tolerance: float = Field(1e-6, ge=0)
    """Absolute tolerance for numeric comparison."""


class FormatReward(RewardEntry):
    """1 when the whole completion matches `pattern`, else 0."""

    name: Literal["format"] = "format"
    pattern: str = Field(DEFAULT_FORMAT_PATTERN, min_length=1, max_length=1000)
    """Regular expression (Python's `regex` module, dot matches newlines) the completion
    must match; refused when it would compile too large (grpo/spec/patterns.py)."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        return checked_pattern(pattern)


class LengthReward(RewardEntry):
    """Soft overlong penalty (DAPO): 0 up to max_length - cache_length, then linear to -1."""

    name: Literal["length"] = "length"
    max_length: SpecInt = Field(64, ge=1, le=131072)
    """Completion length in tokens at which the penalty reaches -1."""
    cache_length: SpecInt = Field(16, ge=0, le=131072)
    """Width in tokens of the linear penalty ramp before max_length."""


class ExactMatchReward(RewardEntry):
    """1 when the completion equals the reference answer (after optional strip), else 0."""

    name: Literal["exact_match"] = "exact_match"
    strip: bool = True
    """Strip surrounding whitespace from both sides before comparing."""


class RegexReward(RewardEntry):
    """1 when `pattern` is found anywhere in the completion, else 0."""

    name: Literal["regex"] = "regex"
    pattern: str = Field(min_length=1, max_length=500)
    """Regular expression (Python's `regex` module, dot matches newlines) searched in the
    completion; refused when it would compile too large (grpo/spec/patterns.py)."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        return checked_pattern(pattern)


class PythonReward(RewardEntry):
    """A function a package installed on the workers registers under the entry-point group
    `grpo.rewards`, or a file in the workers' plugin folder defines (GRPO_PLUGIN_DIRS),
    called as TRL calls reward functions:
    `fn(prompts, completions, **kwargs) -> list[float | None]`, kwargs holding `answer` and
    every extra field of the records, one value per completion."""

    name: Literal["python"] = "python"
    function: str = Field(max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")
    """Entry point name in group `grpo.rewards`, or the name of a function of a plugin file;
    the API accepts only names it finds, each in one place. It is also the entry's default
    `label` (its metrics are `rewards/<function>/...`)."""

    @model_validator(mode="before")
    @classmethod
    def _label_defaults_to_name(cls, data: Any) -> Any:
        """The function's name, not `python`: two python rewards need no labels to differ."""
        if (
            isinstance(data, dict)
            and not data.get("label")
            and isinstance(data.get("function"), str)
        ):
            return {**data, "label": data["function"][:64]}
        return data


class HttpReward(RewardEntry):
    """An endpoint that scores whole groups: POST {run_id, step, groups: [{index, prompt,
    answer, data, completions}]} -> {rewards: [[float | null, ...], ...]} of the same shape."""

    name: Literal["http"] = "http"
    url: EndpointUrl
    """Endpoint URL, under the rule of every URL of a spec (grpo/spec/endpoints.py); its host
    must be listed in the operator's GRPO_REWARD_HOSTS."""
    timeout_s: float = Field(30.0, gt=0, le=600)
    """Seconds one request may take."""
    max_retries: SpecInt = Field(2, ge=0, le=10)
    """Retries (with exponential backoff) after a connection error or a 5xx answer."""
    token_env: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of a worker environment variable whose value is sent as a bearer token: one
    starting GRPO_REWARD_TOKEN_, or one the operator lists in GRPO_REWARD_TOKEN_ENVS; never
    another GRPO_* variable (grpo/spec/token_env.py)."""
    groups_per_request: SpecInt = Field(8, ge=1, le=4096)
    """Groups sent in one request; a step's requests run concurrently."""
    max_concurrency: SpecInt = Field(4, ge=1, le=64)
    """Requests in flight at once for this endpoint."""

    @field_validator("token_env")
    @classmethod
    def _not_a_setting(cls, name: str | None) -> str | None:
        if name is not None and is_reserved_name(name):
            raise ValueError(f"{name!r} may not be used: {token_env_rule(None)}")
        return name


class ModelReward(RewardEntry):
    """A sequence classifier (AutoModelForSequenceClassification) that scores prompt +
    completion; in eval mode, never trained."""

    name: Literal["model"] = "model"
    model: str = Field(min_length=1, max_length=500)
    """Hugging Face model id or a local path inside the allowed model roots."""
    batch_size: SpecInt = Field(16, ge=1, le=4096)
    """Completions scored per forward pass."""
    label_index: SpecInt = Field(0, ge=0, le=100_000)
    """Which output logit is the reward."""
    max_length: SpecInt = Field(1024, ge=8, le=131072)
    """Prompt + completion tokens kept (from the left) per scored text."""

    @field_validator("model")
    @classmethod
    def _model_named_cleanly(cls, value: str) -> str:
        parse_model_name(value)  # a hub id or a path, as the policy's `model`
        return value


class CodeReward(RewardEntry):
    """Fraction of the record's tests the completion's program passes, run in a bubblewrap
    sandbox with CPU, memory, process, file-size and output limits."""

    name: Literal["code"] = "code"
    tests_field: str = Field("tests", min_length=1, max_length=100)
    """Record field with the tests: a list of `{"call": "f(1)", "expected": 2}` objects (the
    value compared outside the sandbox: unforgeable) and Python statements (asserts, judged
    inside the program's interpreter: forgeable), or one string of statements."""
    timeout_s: float = Field(5.0, gt=0, le=120)
    """CPU and wall-clock seconds the program and all its tests may take."""
    memory_mb: SpecInt = Field(512, ge=64, le=65536)
    """Address-space limit of the sandboxed process."""


RewardSpec = Annotated[
    AccuracyReward
    | FormatReward
    | LengthReward
    | ExactMatchReward
    | RegexReward
    | PythonReward
    | HttpReward
    | ModelReward
    | CodeReward,
    Field(discriminator="name"),
]
"""One reward entry; `name` picks the kind."""


def checked_pattern(pattern: str) -> str:
    """The pattern, once the worker's compiler accepts it (the same function compiles it
    there)."""
    check_pattern(pattern)
    return pattern


def check_reward_entries(rewards: tuple[RewardSpec, ...]) -> tuple[RewardSpec, ...]:
    """At least one entry, unique labels."""
    if not rewards:
        raise ValueError("at least one reward function is required")
    labels = [r.label for r in rewards]
    if len(set(labels)) != len(labels):
        raise ValueError(
            f"reward labels must be unique, got {labels}: give each entry its own `label`"
        )
    return rewards
