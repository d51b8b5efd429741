"""Fitting a prompt into `max_prompt_length` tokens without cutting its template.

Cutting the rendered prompt's tokens from the left would drop the system turn and the
`<|im_start|>user` marker (or the R1 template's instructions) and keep only the end of the
question. Instead the record's own content is cut: the prompt's text when it is a string,
else the last user turn's content. The start of the content goes, the end (where a question
usually asks) stays, and the template and every other turn stay whole. A prompt whose
template alone does not fit is refused with an error naming it. Knows nothing of models.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grpo.data.example import Example
from grpo.data.prompts import format_prompt
from grpo.spec.data import DataSpec


@dataclasses.dataclass(frozen=True)
class FittedPrompt:
    text: str
    is_truncated: bool


def fit_prompt(
    example: Example,
    data: DataSpec,
    tokenizer: Any,
    *,
    max_length: int,
    add_special_tokens: bool,
    tools: list[dict[str, Any]] | None = None,
) -> FittedPrompt:
    """The rendered prompt in at most max_length tokens, its content cut from the start."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])

    text = format_prompt(example, data, tokenizer, tools=tools)
    if count(text) <= max_length:
        return FittedPrompt(text, is_truncated=False)
    content = _content(example)
    frame = count(format_prompt(_with_content(example, ""), data, tokenizer, tools=tools))
    ids = tokenizer(content, add_special_tokens=False)["input_ids"]
    # the cut can merge differently at its edge, so try one token fewer until it fits
    for keep in range(min(len(ids), max_length - frame), 0, -1):
        kept = tokenizer.decode(ids[-keep:])
        text = format_prompt(_with_content(example, kept), data, tokenizer, tools=tools)
        if count(text) <= max_length:
            return FittedPrompt(text, is_truncated=True)
    raise ValueError(
        f"prompt {example.id!r} does not fit max_prompt_length ({max_length} tokens): its "
        f"template and other turns alone take {frame} tokens; raise max_prompt_length"
    )


def _content(example: Example) -> str:
    """The text the cut may shorten: the prompt string or the last user turn's content."""
    if isinstance(example.prompt, str):
        return example.prompt
    users = [m for m in example.prompt if m["role"] == "user"]
    return users[-1]["content"] if users else ""


def _with_content(example: Example, content: str) -> Example:
    if isinstance(example.prompt, str):
        return dataclasses.replace(example, prompt=content)
    messages = [dict(m) for m in example.prompt]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if users:
        messages[users[-1]]["content"] = content
    return dataclasses.replace(example, prompt=messages)
