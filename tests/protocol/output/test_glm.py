"""GLM answers as the models write them: GLM-4.5/4.6 (``glm45``) put each tag on its own
line, GLM-4.7/5 (``glm47``) write them back to back (their chat templates render calls so)."""

from __future__ import annotations

from typing import Any

import pytest

from app.generation import ToolFormat
from app.protocol.output import ChoiceParser, ParsedOutput, ToolCall, output_parser
from tests.protocol.output.helpers import make_parser, one_tool, parsed, stream
from tests.protocol.output.splits import assert_every_split

TOOLS = one_tool(
    "get_weather",
    city={"type": "string"},
    days={"type": "integer"},
    units={"type": ["string", "null"]},
    options={"type": "object"},
    when={"type": "array"},
)


def glm(fmt: ToolFormat = "glm47", **options: Any) -> ChoiceParser:
    return make_parser(tool_format=fmt, tools=TOOLS, **{"reasoning": True, **options})


def test_glm45_reasoning_content_and_one_call() -> None:
    text = (
        "\n<think>The user wants the weather.</think>\nLet me check.\n"
        "<tool_call>get_weather\n"
        "<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n"
        "</tool_call>"
    )
    assert_every_split(
        lambda: glm("glm45"),
        text,
        ParsedOutput(
            content="Let me check.\n",
            reasoning_content="The user wants the weather.",
            tool_calls=[ToolCall("call_0000", "get_weather", '{"city": "北京", "days": 2}')],
        ),
    )


def test_glm47_several_calls_back_to_back_typed_by_the_schema() -> None:
    text = (
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
        '<arg_key>options</arg_key><arg_value>{"a": [1, {"b": null}]}</arg_value>'
        "<arg_key>when</arg_key><arg_value>[1, 2]</arg_value>"
        "<arg_key>units</arg_key><arg_value>null</arg_value></tool_call>"
        "<tool_call>list_files</tool_call>"
    )
    assert_every_split(
        glm,
        text,
        ParsedOutput(
            content=None,
            reasoning_content=None,
            tool_calls=[
                ToolCall(
                    "call_0000",
                    "get_weather",
                    '{"city": "Paris", "options": {"a": [1, {"b": null}]}, "when": [1, 2], '
                    '"units": null}',
                ),
                ToolCall("call_0001", "list_files", "{}"),
            ],
        ),
    )


def test_values_are_verbatim_and_strings_stay_strings() -> None:
    """A string-typed value that looks like a number stays text; whitespace inside a value is
    kept (vLLM keeps GLM values verbatim); a parameter the schema does not know is text."""
    text = (
        "<tool_call>get_weather<arg_key> city </arg_key><arg_value> 42\n</arg_value>"
        "<arg_key>extra</arg_key><arg_value>7</arg_value></tool_call>"
    )
    out = glm().parse(text)
    assert out.tool_calls == [
        ToolCall("call_0000", "get_weather", '{"city": " 42\\n", "extra": "7"}')
    ]


def test_markers_inside_a_value_are_text() -> None:
    code = 'print("<tool_call>x</tool_call>")\n<arg_key>'
    text = f"<tool_call>write<arg_key>code</arg_key><arg_value>{code}</arg_value></tool_call>done"
    assert_every_split(
        glm,
        text,
        ParsedOutput(
            "done",
            None,
            [
                ToolCall(
                    "call_0000",
                    "write",
                    '{"code": "print(\\"<tool_call>x</tool_call>\\")\\n<arg_key>"}',
                )
            ],
        ),
    )


def test_a_truncated_call_is_text() -> None:
    text = "Checking.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par"
    parser = glm()
    out = parsed(stream(parser, [text[:15], text[15:]]))
    assert out == ParsedOutput(content=text, reasoning_content=None, tool_calls=[])
    assert parser.finish_reason("length") == "length"


@pytest.mark.parametrize(
    "block",
    [
        "<tool_call>get_weather<arg_key>city</arg_key></tool_call>",  # a key without a value
        "<tool_call>get_weather<arg_value>x</arg_value></tool_call>",  # a value without a key
        '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',  # Hermes JSON
        "<tool_call>get weather</tool_call>",  # a name with a space
        "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>"
        "<arg_key>a</arg_key><arg_value>2</arg_value></tool_call>",  # a key twice
        "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value> stray </tool_call>",
        "<tool_call></tool_call>",
    ],
)
def test_a_malformed_call_is_text(block: str) -> None:
    assert glm().parse(f"a{block}b") == ParsedOutput(f"a{block}b", None, [])


def test_a_prompt_that_opened_think_starts_in_reasoning() -> None:
    """GLM-4.7's generation prompt ends with ``<think>``: the output opens inside it."""
    text = "Plan.</think><tool_call>list_files</tool_call>"
    out = glm(starts_in_reasoning=True).parse(text)
    assert out == ParsedOutput(None, "Plan.", [ToolCall("call_0000", "list_files", "{}")])


def test_with_tool_calls_off_the_markup_is_content() -> None:
    """The service reads calls only when the request sent tools."""
    text = "<think>x</think><tool_call>list_files</tool_call>"
    parser = output_parser("glm47", reasoning=True, tools=None, tool_calls=False)
    assert parser.parse(text) == ParsedOutput("<tool_call>list_files</tool_call>", "x", [])
