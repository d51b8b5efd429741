"""The builtin:tiny-tools warm-up trains on whole trajectories in the tool chat template,
with the tool response never a label (the tool mask, applied to the warm-up)."""

from grpo.data.tools_task import calc, tools_examples
from grpo.models.tool_template import build_tool_tokenizer
from grpo.models.tool_warmup import encode_trajectory


def test_a_trajectory_is_labelled_on_the_model_turns_only():
    tokenizer = build_tool_tokenizer()
    ids, labels = encode_trajectory("42*34=", "1428", calls=True, tokenizer=tokenizer)
    assert tokenizer.decode(ids) == (
        '<s>[calc]42*34=<tool_call>{"name":"calc","arguments":{"x":"42*34"}}</tool_call></s>'
        "<tool_response>1428</tool_response>1428</s>"
    )
    labelled = tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label != -100])
    assert (
        labelled == '<tool_call>{"name":"calc","arguments":{"x":"42*34"}}</tool_call></s>1428</s>'
    )
    ids, labels = encode_trajectory("42*34=", "1428", calls=False, tokenizer=tokenizer)
    assert (
        tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label != -100])
        == "1428</s>"
    )


def test_every_product_of_the_task_has_four_digits_and_the_calculator_computes_it():
    examples = tools_examples("train") + tools_examples("test")
    assert len(examples) == 68 * 68 and len({e.id for e in examples}) == len(examples)
    assert all(len(e.answer) == 4 and calc(e.id) == e.answer for e in examples)
