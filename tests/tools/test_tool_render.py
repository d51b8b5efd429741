"""Tool turns in the model's own chat template (grpo/tools/render.py), builtin:small's
template with tools (Qwen2.5's way) and without (plain ChatML, byte for byte), and the
start-of-run refusal of a template that cannot render tools (the API cannot see tokenizers)."""

import copy

import pytest

from grpo.engines.tool_loop import build_tool_loop
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.spec import JobSpec
from grpo.tools.kind import ToolRunFacts
from grpo.tools.render import template_problem, tool_turn_text
from tests.tools.tool_engine import ScriptedEngine

CALC = {"type": "function", "function": {"name": "calc", "description": "x", "parameters": {}}}
PLAIN_CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""builtin:small's template before it rendered tools (SMALL_VERSION v1): ChatML alone."""


@pytest.fixture
def plain_chatml(small_tokenizer):
    tokenizer = copy.deepcopy(small_tokenizer)
    tokenizer.chat_template = PLAIN_CHATML
    return tokenizer


def test_a_chatml_tool_turn_follows_the_sampled_end_of_turn(small_tokenizer):
    # the model already sampled <|im_end|>: the tool turn starts with the template's newline,
    # and the results are <tool_response> blocks of one user turn (Qwen2.5's way)
    text = tool_turn_text(small_tokenizer, ["408", "7"], ended_with_eos=True)
    assert text == (
        "\n<|im_start|>user\n<tool_response>\n408\n</tool_response>\n<tool_response>\n7\n"
        "</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert tool_turn_text(small_tokenizer, ["408"], ended_with_eos=False).startswith("<|im_end|>\n")


def test_builtin_small_lists_tools_in_the_system_turn_and_renders_calls(small_tokenizer):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "12*34="},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "calc", "arguments": {"x": "12*34"}}}
        ]},
        {"role": "tool", "content": "408"},
    ]  # fmt: skip
    text = small_tokenizer.apply_chat_template(messages, tools=[CALC], tokenize=False)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert '<tools>\n{"type": "function", "function": {"name": "calc", ' in text
    assert text.count("<|im_start|>system") == 1  # the system message is in the tools turn
    assert text.endswith(
        "<|im_start|>user\n12*34=<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
        '{"name": "calc", "arguments": {"x": "12*34"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n408\n</tool_response><|im_end|>\n"
    )
    assert template_problem(small_tokenizer, [CALC]) is None


@pytest.mark.parametrize("opens", [True, False])
def test_builtin_small_renders_chats_without_tools_as_plain_chatml(small_tokenizer, opens):
    chats = [
        [{"role": "user", "content": "2+2?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
        [
            {"role": "user", "content": "a\nb <think> x </think>"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": ""},
        ],
    ]
    for chat in chats:
        ours = small_tokenizer.apply_chat_template(
            chat, tokenize=False, add_generation_prompt=opens
        )
        plain = small_tokenizer.apply_chat_template(
            chat, tokenize=False, add_generation_prompt=opens, chat_template=PLAIN_CHATML
        )
        assert ours == plain


def test_templates_that_cannot_show_tools_are_named(plain_chatml):
    assert "no chat template" in template_problem(build_char_tokenizer(), [CALC])
    assert "does not render tools" in template_problem(plain_chatml, [CALC])


def test_the_run_refuses_them_at_start_naming_tools(plain_chatml):
    spec = JobSpec(model="builtin:small", tools=[{"name": "python", "function": "calc"}])
    inner = ScriptedEngine(plain_chatml, lambda context: "")
    with pytest.raises(ValueError, match=r"^tools: the model's chat template does not render"):
        build_tool_loop(inner, spec, plain_chatml, [0], ToolRunFacts())
