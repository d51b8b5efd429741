"""The `data` section of a JobSpec: where prompts and reference answers come from.
Pydantic only, imports without torch; grpo/data/loading.py loads what it describes."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from grpo.spec.config import SECTION_CONFIG
from grpo.spec.sources import parse_data_source

BUILTIN_TASKS = ("builtin:arith", "builtin:code", "builtin:tools")


class DataSpec(BaseModel):
    """Where prompts and reference answers come from."""

    model_config = SECTION_CONFIG
    source: str = Field("builtin:arith", min_length=1, max_length=500)
    """`builtin:arith`, `builtin:code`, `builtin:tools` (multiplication with a calculator tool),
    `dataset:<id>` (uploaded), `hf:<name>[:<config>]` or a JSONL or parquet path
    (`file:<path>` or any other text); see grpo/spec/sources.py."""
    split: str = Field("train", pattern=r"^[A-Za-z0-9_.\-\[\]:%]+$")
    """Split to train on."""
    subset: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")
    """Config name of an `hf:<repo>` source (TRL recipes' `dataset_config`); `hf:<repo>:<config>`
    says the same."""
    system_prompt: str | None = Field(None, min_length=1, max_length=20000)
    """A system turn put before every prompt (public recipes' `system_prompt`), rendered with
    the model's chat template; refused with records whose prompts carry their own."""
    prompt_field: str = Field("prompt", min_length=1, max_length=100)
    """Field of each record that holds the prompt."""
    answer_field: str | None = Field("answer", min_length=1, max_length=100)
    """Field of each record that holds the reference answer (reward functions get it under
    this name and as `answer`); null when the records have none, as for judge, reward-model
    and code rewards: then no reward entry may need one (`accuracy`, `exact_match`)."""
    prompt_template: str = Field("{prompt}", max_length=4000)
    """Text around each prompt; `{prompt}` is replaced by the record's prompt."""
    use_chat_template: bool = True
    """Apply the tokenizer's chat template when it has one."""

    @field_validator("source")
    @classmethod
    def _source_known(cls, value: str) -> str:
        return checked_data_source(value)

    @field_validator("prompt_template")
    @classmethod
    def _has_placeholder(cls, value: str) -> str:
        if "{prompt}" not in value:
            raise ValueError("must contain the placeholder {prompt}")
        return value


def checked_data_source(value: str) -> str:
    """A data source, once its kind parses and a built-in one exists: the rule of
    `data.source` and `eval.source` alike."""
    if value.startswith("builtin:") and value not in BUILTIN_TASKS:
        raise ValueError(f"unknown built-in task {value!r}; choose one of {BUILTIN_TASKS}")
    parse_data_source(value)
    return value
