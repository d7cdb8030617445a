"""Pythonic answers as Llama 4 and Gemma 3 (vLLM's pythonic template) write them: a list of
calls with keyword arguments, read as literals only."""

from __future__ import annotations

import pytest

from app.protocol.output import ChoiceParser, ParsedOutput, ToolCall, detect
from tests.protocol.output.helpers import make_parser, parsed, stream
from tests.protocol.output.splits import assert_every_split


def pythonic() -> ChoiceParser:
    return make_parser(reasoning=False, tool_format="pythonic")


def test_one_call() -> None:
    text = '[get_weather(city="San Francisco", metric="celsius")]'
    assert_every_split(pythonic, text, ParsedOutput(None, None, [
        ToolCall("call_0000", "get_weather", '{"city": "San Francisco", "metric": "celsius"}')
    ]))  # fmt: skip


def test_several_calls_and_llama4_tags() -> None:
    text = "<|python_start|>[read_file(path='a.py'), list_dir(), ns.tool(x=1)]<|python_end|>"
    assert_every_split(
        pythonic,
        text,
        ParsedOutput(
            None,
            None,
            [
                ToolCall("call_0000", "read_file", '{"path": "a.py"}'),
                ToolCall("call_0001", "list_dir", "{}"),
                ToolCall("call_0002", "ns.tool", '{"x": 1}'),
            ],
        ),
    )


def test_text_then_a_tagged_list() -> None:
    text = "Checking the time.<|python_start|>[get_time(tz='UTC')]<|python_end|>"
    assert_every_split(pythonic, text, ParsedOutput("Checking the time.", None, [
        ToolCall("call_0000", "get_time", '{"tz": "UTC"}')
    ]))  # fmt: skip


def test_nested_literals() -> None:
    text = (
        "[plot(points=[(1, -2.5), (3, +4)], style={'color': 'red', 'dash': None}, "
        "flags={True}, legend=false, title=null, note='''it's [multi\nline''')]"
    )
    call = ToolCall(
        "call_0000",
        "plot",
        '{"points": [[1, -2.5], [3, 4]], "style": {"color": "red", "dash": null}, '
        '"flags": [true], "legend": false, "title": null, "note": "it\'s [multi\\nline"}',
    )
    assert_every_split(pythonic, text, ParsedOutput(None, None, [call]))


def test_whitespace_around_the_calls_is_layout() -> None:
    text = "\n [get_time()] \n"
    assert_every_split(pythonic, text, ParsedOutput(None, None, [
        ToolCall("call_0000", "get_time", "{}")
    ]))  # fmt: skip


def test_brackets_quotes_and_markers_inside_strings() -> None:
    text = (
        "[run(cmd='grep -F \"]\" x', code=\"print(')')  # [\", tag='<|python_end|>', s='it\\'s')]"
    )
    assert_every_split(pythonic, text, ParsedOutput(None, None, [ToolCall(
        "call_0000", "run",
        '{"cmd": "grep -F \\"]\\" x", "code": "print(\')\')  # [", '
        '"tag": "<|python_end|>", "s": "it\'s"}',
    )]))  # fmt: skip


def test_a_comment_in_the_list_is_skipped() -> None:
    text = "[read_file(path='a.py'),  # it's (the first one\n get_time()]"
    assert_every_split(pythonic, text, ParsedOutput(None, None, [
        ToolCall("call_0000", "read_file", '{"path": "a.py"}'),
        ToolCall("call_0001", "get_time", "{}"),
    ]))  # fmt: skip


def test_text_after_the_list_is_content() -> None:
    text = "[get_time(tz='''it's [x''')]\nThen I will answer."
    assert_every_split(pythonic, text, ParsedOutput("\nThen I will answer.", None, [
        ToolCall("call_0000", "get_time", '{"tz": "it\'s [x"}')
    ]))  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "[1] Smith et al., 2020.",
        "[the docs](https://example.com) say so.",
        "[]",
        "[f(1)]",
        "[f(**opts)]",
        "[f(x=1, x=2)]",
        "[f(x=os.system('true'))]",
        "[f(x=f'{y}')]",
        "[f(x=1e999)]",
        "[f(x={1: 'a'})]",
        "[f(x=b'bytes')]",
        "[(lambda: 1)()]",
    ],
)
def test_anything_but_a_list_of_literal_calls_is_content(text: str) -> None:
    assert_every_split(pythonic, text, ParsedOutput(text, None, []))


def test_a_call_list_inside_prose_is_content() -> None:
    text = "You could call [get_time()] yourself."
    assert pythonic().parse(text) == ParsedOutput(text, None, [])


def test_a_truncated_list_is_text() -> None:
    text = "[get_weather(city='San Fr"
    parser = pythonic()
    assert parsed(stream(parser, [text[:10], text[10:]])) == ParsedOutput(text, None, [])
    assert parser.finish_reason("length") == "length"


def test_the_format_is_found_in_its_template() -> None:
    template = (
        "you MUST put it in the format of [func_name1(params_name1=params_value1, "
        "params_name2=params_value2...), func_name2(params)]"
    )
    assert detect([template]) == "pythonic"
