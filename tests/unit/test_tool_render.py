"""Tool turns in the model's own chat template (grpo/tools/render.py), and the start-of-run
refusal of a template that cannot render tools (the API cannot see tokenizers)."""

import pytest

from grpo.engines.tool_loop import build_tool_loop
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.spec import JobSpec
from grpo.tools.kind import ToolRunFacts
from grpo.tools.render import template_problem, tool_turn_text
from tests.unit.tool_engine import ScriptedEngine

CALC = {"type": "function", "function": {"name": "calc", "description": "x", "parameters": {}}}


def test_a_chatml_tool_turn_follows_the_sampled_end_of_turn(small_tokenizer):
    # the model already sampled <|im_end|>: the tool turn starts with the template's newline
    text = tool_turn_text(small_tokenizer, ["408", "7"], ended_with_eos=True)
    assert text == (
        "\n<|im_start|>tool\n408<|im_end|>\n<|im_start|>tool\n7<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tool_turn_text(small_tokenizer, ["408"], ended_with_eos=False).startswith("<|im_end|>\n")


def test_templates_that_cannot_show_tools_are_named(small_tokenizer):
    assert "no chat template" in template_problem(build_char_tokenizer(), [CALC])
    assert "does not render tools" in template_problem(small_tokenizer, [CALC])


def test_the_run_refuses_them_at_start_naming_tools(small_tokenizer):
    spec = JobSpec(model="builtin:small", tools=[{"name": "python", "function": "calc"}])
    inner = ScriptedEngine(small_tokenizer, lambda context: "")
    with pytest.raises(ValueError, match=r"^tools: the model's chat template does not render"):
        build_tool_loop(inner, spec, small_tokenizer, [0], ToolRunFacts())
