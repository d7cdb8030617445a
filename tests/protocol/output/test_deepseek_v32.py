"""DeepSeek V3.2 and V4 answers in DSML as the models write them (their encoders and the chat
templates render calls the same way; V3.2 wraps them in ``function_calls``, V4 in
``tool_calls``)."""

from __future__ import annotations

from typing import Any

import pytest

from app.protocol.output import FORMATS, ChoiceParser, ParsedOutput, ToolCall
from tests.protocol.output.helpers import make_parser, one_tool, parsed, stream
from tests.protocol.output.splits import assert_calls_sent_as_they_end, assert_every_split

D = "｜DSML｜"
TOOLS = one_tool("get_weather", location={"type": "string"}, count={"type": "integer"})


def dsml(**options: Any) -> ChoiceParser:
    return make_parser(tool_format="deepseek_v32", tools=TOOLS, **{"reasoning": True, **options})


def section(wrapper: str, *invokes: str) -> str:
    return f"<{D}{wrapper}>\n" + "".join(invokes) + f"</{D}{wrapper}>"


def invoke(name: str, *parameters: tuple[str, str, str]) -> str:
    body = "".join(
        f'<{D}parameter name="{key}" string="{is_string}">{value}</{D}parameter>\n'
        for key, is_string, value in parameters
    )
    return f'<{D}invoke name="{name}">\n{body}</{D}invoke>\n'


def test_v32_example_of_its_documentation() -> None:
    """The format's own example: a string and a number, two calls in one section."""
    text = "Checking both.\n\n" + section(
        "function_calls",
        invoke("get_weather", ("location", "true", "杭州"), ("count", "false", "5")),
        invoke("get_weather", ("location", "true", "北京")),
    )
    assert_every_split(
        dsml,
        text,
        ParsedOutput(
            "Checking both.\n\n",
            None,
            [
                ToolCall("call_0000", "get_weather", '{"location": "杭州", "count": 5}'),
                ToolCall("call_0001", "get_weather", '{"location": "北京"}'),
            ],
        ),
    )


def test_v4_reasoning_then_a_tool_calls_section() -> None:
    """V4 thinks in ``<think>``, which its prompt opens, and wraps calls in ``tool_calls``."""
    nested = '{"a": [1, {"b": "x"}], "c": null}'
    text = "Need the weather.</think>\n\n" + section(
        "tool_calls",
        invoke("get_weather", ("location", "true", "a\nb"), ("extra", "false", nested)),
    )
    assert_every_split(
        lambda: dsml(starts_in_reasoning=True),
        text,
        ParsedOutput(
            None,
            "Need the weather.",
            [
                ToolCall(
                    "call_0000",
                    "get_weather",
                    '{"location": "a\\nb", "extra": {"a": [1, {"b": "x"}], "c": null}}',
                )
            ],
        ),
    )


def test_values_without_the_string_attribute_or_not_json() -> None:
    """A missing ``string`` attribute reads JSON when it parses (as vLLM does), else the
    schema decides; a ``string="true"`` number stays text."""
    text = section(
        "function_calls",
        f'<{D}invoke name="get_weather">'
        f'<{D}parameter name="count">7</{D}parameter>'
        f'<{D}parameter name="location" string="false">not json</{D}parameter>'
        f'<{D}parameter name="zip" string="true">01234</{D}parameter>'
        f"</{D}invoke>",
    )
    out = dsml().parse(text)
    assert out.tool_calls == [
        ToolCall("call_0000", "get_weather", '{"count": 7, "location": "not json", "zip": "01234"}')
    ]


def test_markers_inside_a_value_are_text() -> None:
    value = f"</{D}function_calls></{D}invoke>"
    text = section("function_calls", invoke("note", ("text", "true", value)))
    assert_every_split(
        dsml,
        text,
        ParsedOutput(None, None, [ToolCall("call_0000", "note", f'{{"text": "{value}"}}')]),
    )


def test_each_invoke_is_sent_when_it_closes() -> None:
    """V4's section; a call cut off after a sent one is text, the sent one stays."""
    first = invoke("get_weather", ("location", "true", f"</{D}invoke>"), ("count", "false", "2"))
    truncated = f'<{D}invoke name="get_weather">\n<{D}parameter name="location" string="true">Pa'
    text = f"<{D}tool_calls>\n{first}{truncated}"
    end = len(f"<{D}tool_calls>\n{first}") - 1  # the invoke's newline is layout after it
    assert_calls_sent_as_they_end(dsml, text, [end])
    assert_every_split(dsml, text, ParsedOutput("\n" + truncated, None, [
        ToolCall("call_0000", "get_weather", f'{{"location": "</{D}invoke>", "count": 2}}')
    ]))  # fmt: skip


def test_a_truncated_section_is_text() -> None:
    text = f'Ok.<{D}function_calls>\n<{D}invoke name="get_weather">\n<{D}parameter name="loc'
    parser = dsml()
    assert parsed(stream(parser, [text[:10], text[10:]])) == ParsedOutput(text, None, [])
    assert parser.finish_reason("length") == "length"


@pytest.mark.parametrize(
    "body",
    [
        f'<{D}invoke name="f">',  # the invoke never closes
        f"<{D}invoke>\n</{D}invoke>\n",  # no name
        '<invoke name="f"></invoke>',  # MiniMax's tags, not DSML's
        f'text <{D}invoke name="f"></{D}invoke>',
    ],
)
def test_a_malformed_section_is_text(body: str) -> None:
    text = f"<{D}function_calls>{body}</{D}function_calls>"
    assert dsml().parse(text) == ParsedOutput(text, None, [])


def test_dsml_is_not_written_in_special_tokens() -> None:
    """``｜DSML｜`` is an added token that is not special (DeepSeek-V4's tokenizer.json)."""
    assert not FORMATS["deepseek_v32"].special_tokens
