"""Gemma 4 answers as the model writes them: the ``thought`` channel, then calls in Gemma's
object notation with ``<|"|>``-quoted strings (as its chat template renders them)."""

from __future__ import annotations

from typing import Any

import pytest

from app.protocol.output import FORMATS, ChoiceParser, ParsedOutput, ToolCall
from tests.protocol.output.helpers import make_parser, one_tool, parsed, stream
from tests.protocol.output.splits import assert_every_split

Q = '<|"|>'
TOOLS = one_tool(
    "get_weather", location={"type": "string"}, zip={"type": "string"}, days={"type": "integer"}
)


def gemma(**options: Any) -> ChoiceParser:
    return make_parser(tool_format="gemma4", tools=TOOLS, **{"reasoning": True, **options})


def test_thought_channel_then_two_calls() -> None:
    text = (
        "<|channel>thought\nTwo cities.<channel|>"
        f"<|tool_call>call:get_weather{{location:{Q}Tokyo{Q},days:3}}<tool_call|>"
        f"<|tool_call>call:get_weather{{location:{Q}San Francisco, CA{Q}}}<tool_call|>"
    )
    assert_every_split(
        gemma,
        text,
        ParsedOutput(
            None,
            "\nTwo cities.",
            [
                ToolCall("call_0000", "get_weather", '{"location": "Tokyo", "days": 3}'),
                ToolCall("call_0001", "get_weather", '{"location": "San Francisco, CA"}'),
            ],
        ),
    )


def test_nested_objects_arrays_and_bare_values() -> None:
    """Values as the template's ``format_argument`` writes them: a bare value is its JSON
    reading unless the schema declares a string."""
    args = (
        f"flag:true,none:null,ratio:0.5,zip:01234,word:maybe,"
        f"opts:{{unit:{Q}c{Q},{Q}quoted key{Q}:[1,{Q}a,b{Q},[],{{}}]}}"
    )
    out = gemma().parse(f"<|tool_call>call:get_weather{{{args}}}<tool_call|>")
    assert out.tool_calls == [
        ToolCall(
            "call_0000",
            "get_weather",
            '{"flag": true, "none": null, "ratio": 0.5, "zip": "01234", "word": "maybe", '
            '"opts": {"unit": "c", "quoted key": [1, "a,b", [], {}]}}',
        )
    ]


def test_markers_inside_a_quoted_string_are_text() -> None:
    value = "x}<tool_call|><|tool_call>call:y{}"
    text = f"<|tool_call>call:note{{text:{Q}{value}{Q}}}<tool_call|>after"
    assert_every_split(
        gemma,
        text,
        ParsedOutput("after", None, [ToolCall("call_0000", "note", f'{{"text": "{value}"}}')]),
    )


def test_a_truncated_call_is_text() -> None:
    text = f"Sure.<|tool_call>call:get_weather{{location:{Q}Tok"
    parser = gemma()
    assert parsed(stream(parser, [text[:12], text[12:]])) == ParsedOutput(text, None, [])
    assert parser.finish_reason("length") == "length"


@pytest.mark.parametrize(
    "call",
    [
        "get_weather{}",  # no call: prefix
        "call:get_weather",  # no argument object
        f"call:get_weather{{location:{Q}Tokyo}}",  # an unclosed string
        "call:get_weather{a:1,a:2}",  # a key twice
        "call:get_weather{a:1} trailing",
        "call:get weather{}",
        "call:f{a:}",
    ],
)
def test_a_malformed_call_is_text(call: str) -> None:
    text = f"<|tool_call>{call}<tool_call|>"
    assert gemma().parse(text) == ParsedOutput(text, None, [])


def test_an_empty_thought_channel_and_the_stop_at_the_tool_response() -> None:
    """With thinking off the template's prompt closes the channel itself; the model then
    answers directly. A turn of calls ends at ``<|tool_response>``: the upstream stops there."""
    assert gemma().parse("<|channel>thought<channel|>Hi") == ParsedOutput("Hi", None, [])
    fmt = FORMATS["gemma4"]
    assert fmt.stop == ("<|tool_response>",) and fmt.special_tokens
