"""Tool turns in the model's own chat template: the text the trajectory gets after an
assistant turn that called tools (the tool messages, and the template's opening of the
next assistant turn), and the check that a template renders tools at all.

The text is the difference of two renderings, [user, assistant] and [user, assistant,
tool...] with the generation prompt, taken after the assistant's content; the turn's end
marker (EOS) the model already sampled is not repeated. So a Qwen2.5 template yields
`\\n<|im_start|>user\\n<tool_response>\\n...\\n</tool_response><|im_end|>\\n<|im_start|>assistant\\n`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MARK = "\u2063ASSISTANT-TURN\u2063"
"""Stands for the assistant's content in the probe renderings; found once in each."""


def tool_turn_text(tokenizer: Any, results: Sequence[str], *, ended_with_eos: bool) -> str:
    """What follows an assistant turn whose calls answered `results` (one tool message
    each), up to the opening of the next assistant turn."""
    base = [{"role": "user", "content": "?"}, {"role": "assistant", "content": MARK}]
    tools = [{"role": "tool", "content": r} for r in results]
    full = tokenizer.apply_chat_template(base + tools, tokenize=False, add_generation_prompt=True)
    after = str(full).split(MARK, 1)[1]
    eos = tokenizer.eos_token or ""
    if ended_with_eos and eos and after.startswith(eos):
        after = after[len(eos) :]
    return after


def template_problem(tokenizer: Any, schemas: Sequence[dict[str, Any]]) -> str | None:
    """Why this tokenizer's chat template cannot hold a tool conversation (None: it can):
    it must exist, show the tools' names in a prompt, and show a tool message's content."""
    if not getattr(tokenizer, "chat_template", None):
        return "the model's tokenizer has no chat template, so it cannot be shown tools"
    messages = [{"role": "user", "content": "?"}]
    try:
        prompt = str(tokenizer.apply_chat_template(messages, tools=list(schemas), tokenize=False))
        answer = tool_turn_text(tokenizer, ["\u2063RESULT\u2063"], ended_with_eos=True)
    except Exception as exc:  # jinja raises what the template raises
        return f"the model's chat template fails on a tool conversation: {exc}"
    missing = [s["function"]["name"] for s in schemas if s["function"]["name"] not in prompt]
    if missing:
        return f"the model's chat template does not render tools (no {missing[0]!r} in the prompt)"
    if "\u2063RESULT\u2063" not in answer:
        return "the model's chat template does not render tool messages"
    return None
