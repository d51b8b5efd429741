"""Reward entries of a JobSpec: what each kind of reward function may be told.

Built-in rules (accuracy, format, length, exact_match, regex) and the programmable kinds:
`python` (an entry point installed on the workers, or a function of a plugin file), `http`
(an endpoint on an allowed host), `judge` (an LLM judge on an allowed host), `model` (a
sequence classifier) and `code` (tests run in a sandbox); `multi` combines the others' scores
by a formula. Every entry has a `label`, unique in a spec, that keys its metrics and its
inspector column. Pydantic only: imports without
torch. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from grpo.spec.config import SECTION_CONFIG, SpecInt
from grpo.spec.endpoints import EndpointUrl
from grpo.spec.formula import MAX_FORMULA_CHARS, formula_names, parse_formula
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


class EndpointReward(RewardEntry):
    """What the kinds that call an endpoint share (`http`, `judge`): its URL on an allowed
    host, its time limit and retries, its token and how many requests may be in flight."""

    url: EndpointUrl
    """Endpoint URL, under the rule of every URL of a spec (grpo/spec/endpoints.py); its host
    must be listed in the operator's GRPO_REWARD_HOSTS."""
    timeout_s: float = Field(30.0, gt=0, le=600)
    """Seconds one request may take."""
    max_retries: SpecInt = Field(2, ge=0, le=10)
    """Retries (with exponential backoff) after a connection error, a timeout or a 5xx answer."""
    token_env: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of a worker environment variable whose value is sent as a bearer token: one
    starting GRPO_REWARD_TOKEN_, or one the operator lists in GRPO_REWARD_TOKEN_ENVS; never
    another GRPO_* variable (grpo/spec/token_env.py)."""
    max_concurrency: SpecInt = Field(4, ge=1, le=64)
    """Requests in flight at once for this endpoint."""

    @field_validator("token_env")
    @classmethod
    def _not_a_setting(cls, name: str | None) -> str | None:
        if name is not None and is_reserved_name(name):
            raise ValueError(f"{name!r} may not be used: {token_env_rule(None)}")
        return name


class HttpReward(EndpointReward):
    """An endpoint that scores whole groups: POST {run_id, step, groups: [{index, prompt,
    answer, data, completions}]} -> {rewards: [[float | null, ...], ...]} of the same shape."""

    name: Literal["http"] = "http"
    groups_per_request: SpecInt = Field(8, ge=1, le=4096)
    """Groups sent in one request; a step's requests run concurrently."""


class JudgeReward(EndpointReward):
    """An LLM judge: each completion is put to an OpenAI-compatible chat-completions endpoint
    (a vLLM server, `grpo vllm-serve`, any compatible service) as `rubric` filled in, and the
    judge's answer is read as a score: the last number in it (`7`, `Score: 7/10`) within
    `score_range`, or, with `labels`, the label it names last, mapped to its score. The
    judge's raw answer is kept beside the score (the completion's `<label>.answer` column)."""

    name: Literal["judge"] = "judge"
    model: str = Field(min_length=1, max_length=200)
    """The model name the endpoint serves, sent as the request's `model`."""
    rubric: str = Field(min_length=1, max_length=20_000)
    """The user message: `{prompt}`, `{completion}`, `{answer}` and `{<record column>}` are
    replaced by the completion's values (`{{` and `}}` are literal braces); it must hold
    `{completion}`."""
    system: str | None = Field(None, max_length=20_000)
    """An optional system message, sent as written."""
    score_range: tuple[float, float] = (0.0, 10.0)
    """[low, high] a numeric score must lie in (one outside it is an unparsable answer)."""
    labels: dict[str, float] | None = Field(None, min_length=1, max_length=50)
    """Labels mapped to scores (`{"correct": 1, "incorrect": 0}`): the judge's answer is
    scored by the label it names last (whole words, any case); null: a number is read."""
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: SpecInt = Field(256, ge=1, le=32768)
    """The most tokens the judge may answer with."""
    timeout_s: float = Field(60.0, gt=0, le=600)
    """Seconds one judge request may take."""
    max_concurrency: SpecInt = Field(8, ge=1, le=64)
    """Judge requests in flight at once (one per completion)."""

    @field_validator("rubric")
    @classmethod
    def _fills_in(cls, rubric: str) -> str:
        return checked_rubric(rubric)

    @field_validator("labels")
    @classmethod
    def _labels_are_words(cls, labels: dict[str, float] | None) -> dict[str, float] | None:
        if labels is None:
            return None
        folded = [label.strip().lower() for label in labels]
        if any(not label or len(label) > 100 for label in folded):
            raise ValueError("each label must be 1 to 100 characters, not only spaces")
        if len(set(folded)) != len(folded):
            raise ValueError(f"labels must differ ignoring case, got {sorted(labels)}")
        return labels

    @model_validator(mode="after")
    def _range_is_ordered(self) -> JudgeReward:
        low, high = self.score_range
        if not low < high:
            raise ValueError(f"score_range must be [low, high] with low < high, got {[low, high]}")
        return self


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


class MultiReward(RewardEntry):
    """A formula over the scores of the spec's other reward entries, named by their labels
    (OpenAI's multi grader): `min(format, accuracy)` pays the format only with the right
    answer, `format * accuracy` likewise, `0.2 * format + accuracy` is what weights already
    do. Numbers, labels, `+ - * /`, unary `-`, `min`, `max`, `abs` and parentheses; nothing
    else (grpo/spec/formula.py). Null for a completion where a label it reads is null, or
    where it divides by zero or overflows (with a note). Its score is weighted as any
    entry's: give the entries it combines `weight: 0` for the total to be the formula."""

    name: Literal["multi"] = "multi"
    formula: str = Field(min_length=1, max_length=MAX_FORMULA_CHARS)
    """The expression, e.g. `min(format, accuracy)`; it may name the labels of entries other
    than `multi` ones."""

    @field_validator("formula")
    @classmethod
    def _parses(cls, formula: str) -> str:
        parse_formula(formula)
        return formula


RewardSpec = Annotated[
    AccuracyReward
    | FormatReward
    | LengthReward
    | ExactMatchReward
    | RegexReward
    | PythonReward
    | HttpReward
    | JudgeReward
    | ModelReward
    | CodeReward
    | MultiReward,
    Field(discriminator="name"),
]
"""One reward entry; `name` picks the kind."""


RUBRIC_PLACE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
"""A rubric's pieces: an escaped brace, a `{name}`, or a lone brace (refused)."""


def rubric_names(rubric: str) -> list[str]:
    """The names a rubric fills in, in order; ValueError for a bad placeholder."""
    names = []
    for match in RUBRIC_PLACE.finditer(rubric):
        piece, name = match.group(0), match.group(1)
        if piece in ("{{", "}}"):
            continue
        if name is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]{0,99}", name):
            raise ValueError(
                f"bad placeholder {piece!r} at {match.start()}: use {{prompt}}, {{completion}}, "
                "{answer} or {<record column>}, and {{ or }} for a literal brace"
            )
        names.append(name)
    return names


def checked_rubric(rubric: str) -> str:
    if "completion" not in rubric_names(rubric):
        raise ValueError("the rubric must hold {completion}: the judge would not see it")
    return rubric


def checked_pattern(pattern: str) -> str:
    """The pattern, once the worker's compiler accepts it (the same function compiles it
    there)."""
    check_pattern(pattern)
    return pattern


def check_reward_entries(rewards: tuple[RewardSpec, ...]) -> tuple[RewardSpec, ...]:
    """At least one entry, unique labels, and each `multi` formula reading labels of entries
    that are not `multi` ones."""
    if not rewards:
        raise ValueError("at least one reward function is required")
    labels = [r.label for r in rewards]
    if len(set(labels)) != len(labels):
        raise ValueError(
            f"reward labels must be unique, got {labels}: give each entry its own `label`"
        )
    check_formula_names(rewards)
    return rewards


def check_formula_names(rewards: tuple[RewardSpec, ...]) -> None:
    """Each `multi` formula reads only labels of entries that are not `multi` ones; else a
    ValidationError at `<i>.multi.formula` (under the caller's field) naming the label."""
    scored = [r.label for r in rewards if not isinstance(r, MultiReward)]
    for i, entry in enumerate(rewards):
        if not isinstance(entry, MultiReward):
            continue
        for name in formula_names(parse_formula(entry.formula)):
            if name not in scored:
                readable = ", ".join(f"`{label}`" for label in scored) or "none here"
                why = f"`{name}` is not the label of another entry (it may read {readable})"
                error = PydanticCustomError("formula_label", why)
                raise ValidationError.from_exception_data(
                    "rewards",
                    [InitErrorDetails(type=error, loc=(i, "multi", "formula"), input=name)],
                )
