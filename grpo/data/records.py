"""What a dataset record is: a prompt, a reference answer, and every other field.

A prompt is a string or a list of chat messages (`[{"role": "system"|"user"|"assistant",
"content": str}, ...]`, rendered later with the model's chat template). The answer is a
string, any other JSON value (kept as its JSON text) or null (no reference). Every other
field is kept, as it came, for reward functions. One definition serves the upload check
(app/api/routes/datasets.py) and the loader (grpo/data/loading.py), so a record the API
accepts is one the trainer can train on. Imports neither torch nor pydantic; knows nothing
of HTTP or files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ChatMessage = dict[str, str]
Prompt = str | list[ChatMessage]
ROLES = ("system", "user", "assistant")


class RecordError(ValueError):
    """A record that cannot be trained on; the message names where it is."""


@dataclass(frozen=True)
class Record:
    prompt: Prompt
    answer: str
    data: dict[str, Any]
    """Every field but the prompt and answer fields (the id included), as it came."""


def parse_record_line(
    line: str, *, prompt_field: str, answer_field: str | None, where: str
) -> Record:
    """One JSONL line as a Record; errors start with `where` (e.g. `data.jsonl:3`)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{where}: invalid JSON ({exc.msg})") from exc
    return parse_record(record, prompt_field=prompt_field, answer_field=answer_field, where=where)


def parse_record(record: Any, *, prompt_field: str, answer_field: str | None, where: str) -> Record:
    """A decoded record as a Record (answer "" without an answer field); errors start with
    `where`."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for name in (prompt_field, answer_field):
        if name is not None and name not in record:
            raise RecordError(f"{where}: missing field {name!r} (has {sorted(record)})")
    answer = None if answer_field is None else record[answer_field]
    if answer is None:
        answer_text = ""  # null is "no reference", not the text "null"
    else:
        answer_text = answer if isinstance(answer, str) else json.dumps(answer)
    data = {k: v for k, v in record.items() if k not in (prompt_field, answer_field)}
    prompt = _prompt(record[prompt_field], field=prompt_field, where=where)
    return Record(prompt=prompt, answer=answer_text, data=data)


def has_system_turn(prompt: Prompt) -> bool:
    """Whether a prompt carries its own system message (a chat prompt with a system turn)."""
    return isinstance(prompt, list) and any(m["role"] == "system" for m in prompt)


SYSTEM_PROMPT_CLASH = (
    "data.system_prompt adds a system turn, but the prompt of {where} already has one: "
    "drop data.system_prompt or the records' system messages"
)


def _prompt(value: Any, *, field: str, where: str) -> Prompt:
    if isinstance(value, str):
        if not value:
            raise RecordError(f"{where}: field {field!r} is empty")
        return value
    if not isinstance(value, list):
        raise RecordError(
            f"{where}: field {field!r} must be a string or a list of chat messages, "
            f"got {type(value).__name__}"
        )
    if not value:
        raise RecordError(f"{where}: field {field!r} is an empty list of messages")
    return [_message(m, at=f"{where}: {field}[{i}]") for i, m in enumerate(value)]


def _message(message: Any, *, at: str) -> ChatMessage:
    if not isinstance(message, dict) or set(message) != {"role", "content"}:
        raise RecordError(f'{at}: a message is {{"role": ..., "content": ...}} and nothing else')
    role, content = message["role"], message["content"]
    if role not in ROLES:
        raise RecordError(f"{at}: role must be one of {', '.join(ROLES)}, got {role!r}")
    if not isinstance(content, str):
        raise RecordError(f"{at}: content must be a string, got {type(content).__name__}")
    return {"role": role, "content": content}
