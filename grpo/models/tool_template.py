"""The chat template of `builtin:tiny-tools`: the character tokenizer's turns in the fewest
characters that still render tools the way the tool loop needs (Hermes/Qwen2.5 markers).

    <s>[calc]12*34=<tool_call>{...}</tool_call></s><tool_response>408</tool_response>408</s>

The prompt lists the tools' names in brackets, a user turn is its bare text, an assistant
turn ends with </s>, a tool turn is `<tool_response>...</tool_response>`. Knows nothing of
training.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerFast

from grpo.models.char_tokenizer import build_char_tokenizer

TOOL_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if tools %}{% for t in tools %}[{{ t.function.name }}]{% endfor %}{% endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}{{ m.content }}{{ eos_token }}"
    "{%- elif m.role == 'tool' -%}<tool_response>{{ m.content }}</tool_response>"
    "{%- else -%}{{ m.content }}{%- endif -%}"
    "{%- endfor -%}"
)


def build_tool_tokenizer() -> PreTrainedTokenizerFast:
    """The character tokenizer with TOOL_CHAT_TEMPLATE."""
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    return tokenizer
