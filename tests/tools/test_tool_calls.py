"""Tool calls read from an assistant turn (Hermes / Qwen2.5 `<tool_call>` JSON): good ones,
several in a turn, and every malformed kind kept with its error."""

from grpo.tools.calls import parse_tool_calls


def test_one_call_with_its_arguments():
    [call] = parse_tool_calls(
        'ok <tool_call>\n{"name": "calc", "arguments": {"x": "2*3"}}\n</tool_call>'
    )
    assert (call.name, call.arguments, call.error) == ("calc", {"x": "2*3"}, None)
    assert call.as_message() == {
        "type": "function",
        "function": {"name": "calc", "arguments": {"x": "2*3"}},
    }


def test_several_calls_in_one_turn_in_order():
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call> and '
        '<tool_call>{"name": "b", "arguments": {"n": 1}}</tool_call>'
    )
    calls = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in calls] == [("a", {}), ("b", {"n": 1})]


def test_no_call_is_no_call():
    assert parse_tool_calls("408") == []


def test_arguments_written_as_a_json_string_are_read():
    [call] = parse_tool_calls('<tool_call>{"name": "a", "arguments": "{\\"n\\": 2}"}</tool_call>')
    assert call.arguments == {"n": 2} and call.error is None


def test_malformed_calls_keep_their_error():
    bad_json, no_name, bad_args, unclosed = parse_tool_calls(
        "<tool_call>{name: a}</tool_call>"
        '<tool_call>{"arguments": {}}</tool_call>'
        '<tool_call>{"name": "a", "arguments": [1]}</tool_call>'
        '<tool_call>{"name": "a"'
    )
    assert "not valid JSON" in bad_json.error
    assert '{"name": ..., "arguments": {...}}' in no_name.error
    assert bad_args.name == "a" and "must be a JSON object" in bad_args.error
    assert "not closed" in unclosed.error and unclosed.text == '{"name": "a"'
