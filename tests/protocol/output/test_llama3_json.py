"""Llama 3.x answers as the model writes them, following Meta's chat templates ("Respond in
the format {"name": function name, "parameters": dictionary of argument name and its
value}"), with or without ``<|python_tag|>``."""

from __future__ import annotations

from app.protocol.output import (
    FORMATS,
    ChoiceParser,
    ParsedOutput,
    ToolCall,
    detect,
    output_parser,
)
from tests.protocol.output.helpers import counting_ids, parsed, stream
from tests.protocol.output.splits import assert_every_split

WEATHER = '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}'
WEATHER_CALL = ToolCall("call_0000", "get_weather", '{"city": "Paris", "unit": "celsius"}')


def llama(*, tool_calls: bool = True) -> ChoiceParser:
    return output_parser(
        "llama3_json", reasoning=False, tools=None, tool_calls=tool_calls, id_factory=counting_ids()
    )


def test_a_bare_call() -> None:
    assert_every_split(llama, WEATHER, ParsedOutput(None, None, [WEATHER_CALL]))


def test_whitespace_around_a_call_is_layout() -> None:
    assert_every_split(llama, f"\n\n{WEATHER}\n", ParsedOutput(None, None, [WEATHER_CALL]))


def test_a_call_after_the_python_tag() -> None:
    assert_every_split(llama, "<|python_tag|>" + WEATHER, ParsedOutput(None, None, [WEATHER_CALL]))


def test_text_then_a_tagged_call() -> None:
    text = "Let me check the weather.\n<|python_tag|>" + WEATHER
    assert_every_split(
        llama, text, ParsedOutput("Let me check the weather.\n", None, [WEATHER_CALL])
    )


def test_several_calls_separated_by_semicolons() -> None:
    text = (
        '\n{"name": "read_file", "parameters": {"path": "a.py"}}; '
        '{"type": "function", "name": "read_file", "arguments": {"path": "b.py"}};'
        '{"name": "list_dir", "parameters": {}};\n'
    )
    assert_every_split(
        llama,
        text,
        ParsedOutput(
            None,
            None,
            [
                ToolCall("call_0000", "read_file", '{"path": "a.py"}'),
                ToolCall("call_0001", "read_file", '{"path": "b.py"}'),
                ToolCall("call_0002", "list_dir", "{}"),
            ],
        ),
    )


def test_a_bare_call_then_a_tagged_one_are_numbered_in_order() -> None:
    text = f'{WEATHER}\n<|python_tag|>{{"name": "get_time", "parameters": {{}}}}'
    deltas = stream(llama(), [text])
    assert [d.tool_call.index for d in deltas if d.tool_call] == [0, 1]
    assert parsed(deltas) == ParsedOutput(None, None, [
        WEATHER_CALL, ToolCall("call_0001", "get_time", "{}")
    ])  # fmt: skip


def test_nested_parameters_and_markers_in_strings() -> None:
    text = (
        '{"name": "edit", "parameters": {"changes": [{"at": {"line": 3}, "text": "};{"}],'
        ' "note": "<|python_tag|>{\\"name\\": \\"x\\"}"}}'
    )
    assert_every_split(
        llama,
        text,
        ParsedOutput(None, None, [ToolCall(
            "call_0000", "edit",
            '{"changes": [{"at": {"line": 3}, "text": "};{"}], '
            '"note": "<|python_tag|>{\\"name\\": \\"x\\"}"}',
        )]),
    )  # fmt: skip


def test_json_that_is_not_a_call_is_content() -> None:
    """An answer the user asked to have in JSON."""
    text = '{"city": "Paris", "temperature": 21, "name": "forecast"}'
    assert_every_split(llama, text, ParsedOutput(text, None, []))


def test_a_call_inside_prose_is_content() -> None:
    text = f"You could call it like this: {WEATHER}"
    assert_every_split(llama, text, ParsedOutput(text, None, []))


def test_text_after_a_call_is_content() -> None:
    text = WEATHER + "\n\nI'll wait for the result."
    assert_every_split(
        llama, text, ParsedOutput("\n\nI'll wait for the result.", None, [WEATHER_CALL])
    )


def test_a_truncated_call_is_text() -> None:
    text = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Par'
    parser = llama()
    assert parsed(stream(parser, [text[:30], text[30:]])) == ParsedOutput(text, None, [])
    assert parser.finish_reason("length") == "length"


def test_malformed_calls_are_text() -> None:
    for text in (
        '{"name": "f", "parameters": "not an object"}',
        '{"name": "f", "parameters": {}, "arguments": {}}',
        '{"name": "", "parameters": {}}',
        '<|python_tag|>brave_search.call(query="weather")',
    ):
        assert llama().parse(text) == ParsedOutput(text, None, []), text


def test_no_tools_sent_means_no_calls() -> None:
    assert llama(tool_calls=False).parse(WEATHER) == ParsedOutput(WEATHER, None, [])


def test_the_format_is_found_in_its_template() -> None:
    template = (
        '{{- \'Respond in the format {"name": function name, "parameters": dictionary of '
        "argument name and its value}.' }}"
    )
    assert detect([template]) == "llama3_json"
    assert FORMATS["llama3_json"].reasoning is None
