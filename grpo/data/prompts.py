"""A prompt as the policy reads it: the spec's prompt template filled in, then the model's
chat template when asked for and present. Knows nothing of models beyond their tokenizer.
"""

from __future__ import annotations

from typing import Any

from grpo.data.example import Example
from grpo.data.records import SYSTEM_PROMPT_CLASH, ChatMessage, has_system_turn
from grpo.spec.data import DataSpec

R1_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question, and the "
    "Assistant solves it. The Assistant first thinks about the reasoning process in the "
    "mind and then provides the User with the answer. The reasoning process and answer "
    "are enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., "
    "<think> reasoning process here </think> <answer> answer here </answer>. "
    "User: {prompt}. Assistant:"
)
"""DeepSeek-R1-Zero's training template (DeepSeek-AI 2025, Table 1); `{prompt}` is replaced."""


def has_chat_template(data: DataSpec, tokenizer: Any) -> bool:
    """Whether prompts are rendered with the tokenizer's chat template."""
    return data.use_chat_template and bool(getattr(tokenizer, "chat_template", None))


def prompt_messages(example: Example, data: DataSpec) -> list[ChatMessage]:
    """The prompt as chat turns: a string is one user turn; the prompt template fills the
    last user turn (the question), so a system turn stays as the record wrote it;
    `data.system_prompt` comes first when set."""
    system = [{"role": "system", "content": data.system_prompt}] if data.system_prompt else []
    if isinstance(example.prompt, str):
        return [*system, {"role": "user", "content": fill_template(data, example.prompt)}]
    messages = [dict(m) for m in example.prompt]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if users:
        messages[users[-1]]["content"] = fill_template(data, messages[users[-1]]["content"])
    return [*system, *messages]


def fill_template(data: DataSpec, text: str) -> str:
    # replace, not str.format: user prompts may hold braces
    return data.prompt_template.replace("{prompt}", text)


def format_prompt(
    example: Example, data: DataSpec, tokenizer: Any, *, tools: list[dict[str, Any]] | None = None
) -> str:
    """The policy's text: the template filled in, then the chat template if asked and present
    (with the generation prompt that opens the assistant's turn, and the `tools` schemas the
    model may call). Chat-message prompts need the chat template."""
    if not has_chat_template(data, tokenizer):
        if not isinstance(example.prompt, str):
            raise ValueError(_unrenderable(example, data))
        return fill_template(data, example.prompt)
    with_tools = {} if tools is None else {"tools": tools}
    rendered = tokenizer.apply_chat_template(
        prompt_messages(example, data), tokenize=False, add_generation_prompt=True, **with_tools
    )
    return str(rendered)


def check_prompts_render(examples: list[Example], data: DataSpec, tokenizer: Any) -> None:
    """Fail before the first step when chat-message prompts or a system prompt meet no chat
    template, or a system prompt meets prompts with their own system turn."""
    if data.system_prompt:
        for example in examples:
            if has_system_turn(example.prompt):
                raise ValueError(SYSTEM_PROMPT_CLASH.format(where=f"prompt {example.id!r}"))
    if has_chat_template(data, tokenizer):
        return
    if data.system_prompt:
        why = (
            "data.use_chat_template is false"
            if not data.use_chat_template
            else ("the model's tokenizer has no chat template")
        )
        raise ValueError(f"data.system_prompt needs a chat template, but {why}")
    for example in examples:
        if not isinstance(example.prompt, str):
            raise ValueError(_unrenderable(example, data))


def _unrenderable(example: Example, data: DataSpec) -> str:
    why = "the model's tokenizer has no chat template"
    if not data.use_chat_template:
        why = "data.use_chat_template is false"
    return f"prompt {example.id!r} is a list of chat messages, but {why}"
