"""Realistic outputs of Qwen3 / Qwen3-Coder / R1-style models, and the edges around them."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from app.protocol.output import (
    ChatDelta,
    ChoiceParser,
    ParsedOutput,
    ToolCall,
    ToolCallDelta,
    output_parser,
)
from tests.protocol.output.helpers import make_parser, one_tool, parsed, stream

QWEN3_TURN = (
    "<think>\nThe user wants the weather in two cities. I'll call the tool twice.\n</think>\n\n"
    "Je vérifie la météo 🌦️ pour vous.\n"
    "<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}\n'
    "</tool_call>\n"
    "<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "東京", "days": [1, 2]}}\n'
    "</tool_call>"
)


def hermes(**options: Any) -> ChoiceParser:
    return make_parser(tool_format="hermes", **{"reasoning": True, **options})


def test_qwen3_thinking_content_and_two_tool_calls() -> None:
    out = hermes().parse(QWEN3_TURN)
    assert out == ParsedOutput(
        content="Je vérifie la météo 🌦️ pour vous.\n",
        reasoning_content=(
            "\nThe user wants the weather in two cities. I'll call the tool twice.\n"
        ),
        tool_calls=[
            ToolCall("call_0000", "get_weather", '{"city": "Zürich", "unit": "celsius"}'),
            ToolCall("call_0001", "get_weather", '{"city": "東京", "days": [1, 2]}'),
        ],
    )
    assert out.finish_reason("stop") == "tool_calls"


ZURICH = '{"city": "Zürich", "unit": "celsius"}'


def test_qwen3_stream_as_openai_chunks() -> None:
    parser = hermes()
    chunks = [QWEN3_TURN[i : i + 5] for i in range(0, len(QWEN3_TURN), 5)]
    openai = [delta.to_openai() for delta in stream(parser, chunks)]
    tool_deltas = [d["tool_calls"][0] for d in openai if "tool_calls" in d]
    assert tool_deltas == [
        {
            "index": 0,
            "id": "call_0000",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ZURICH},
        },
        {
            "index": 1,
            "id": "call_0001",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "東京", "days": [1, 2]}'},
        },
    ]
    assert all(len(d) == 1 for d in openai)
    assert parser.finish_reason("stop") == "tool_calls"


def test_closing_tag_inside_a_json_string_is_text() -> None:
    code = 'print("</tool_call>")\n'
    text = (
        "<tool_call>\n"
        + json.dumps({"name": "write_file", "arguments": {"path": "a.py", "content": code}})
        + "\n</tool_call>"
    )
    out = hermes(reasoning=False).parse(text)
    assert out.content is None
    assert json.loads(out.tool_calls[0].arguments) == {"path": "a.py", "content": code}


def test_malformed_json_stays_content_and_later_calls_still_parse() -> None:
    bad = '<tool_call>\n{"name": "f", "arguments": {"x": 1,}}\n</tool_call>'
    good = '<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>'
    out = hermes(reasoning=False).parse(f"Trying.\n{bad}\n{good}")
    assert out.content == f"Trying.\n{bad}\n"
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("g", "{}")]


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "f", "arguments": {"x": NaN}}',  # not JSON; json.dumps would write it back
        '{"name": "f", "arguments": {"x": 1, "x": 2}}',  # one value would be lost
        '{"name": "f", "arguments": "{\\"x\\": 1}"}',  # arguments must be an object
        '{"arguments": {}}',
        '["f", {}]',
    ],
)
def test_not_a_tool_call_is_content(body: str) -> None:
    text = f"<tool_call>\n{body}\n</tool_call>"
    assert hermes(reasoning=False).parse(text) == ParsedOutput(text, None, [])


def test_cut_by_max_tokens_inside_a_tool_call() -> None:
    text = 'Let me look.\n<tool_call>\n{"name": "search", "arguments": {"q": "tok'
    out = hermes(reasoning=False).parse(text)
    assert out == ParsedOutput(text, None, [])
    assert out.finish_reason("length") == "length"


def test_cut_inside_the_second_tool_call_keeps_the_first() -> None:
    first = '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>'
    text = f'{first}\n<tool_call>\n{{"name": "b", "argu'
    out = hermes(reasoning=False).parse(text)
    assert out.content == '\n<tool_call>\n{"name": "b", "argu'  # the gap is text again
    assert [c.name for c in out.tool_calls] == ["a"]
    assert out.finish_reason("length") == "tool_calls"


def test_unbalanced_quote_falls_back_to_the_first_closing_tag() -> None:
    bad = '<tool_call>\n{"name": "f", "arguments": {"x": "oops}}\n</tool_call>'
    good = '<tool_call>\n{"name": "g", "arguments": {"y": 2}}\n</tool_call>'
    out = hermes(reasoning=False).parse(f"{bad}\n{good}")
    assert out.content == bad + "\n"
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("g", '{"y": 2}')]


def test_cut_inside_reasoning_is_reasoning() -> None:
    out = hermes().parse("<think>\nStill thinking about </thi")
    assert out == ParsedOutput(None, "\nStill thinking about </thi", [])


def test_r1_style_output_starts_inside_reasoning() -> None:
    parser = hermes(starts_in_reasoning=True)
    assert parser.parse("Let me see.\n</think>\n\n42") == ParsedOutput(
        "42", "Let me see.\n", []
    )


def test_thinking_disabled_output_is_content_even_with_a_stray_close_tag() -> None:
    assert hermes().parse("Hi! </think> is a tag.") == ParsedOutput(
        "Hi! </think> is a tag.", None, []
    )


def test_reasoning_off_keeps_think_tags_as_content() -> None:
    text = "<think>x</think>y"
    assert make_parser(reasoning=False, tool_format=None).parse(text) == ParsedOutput(
        text, None, []
    )


def test_whitespace_before_think_and_an_empty_think_block() -> None:
    assert hermes().parse("\n<think>\n\n</think>\n\nHello") == ParsedOutput(
        "Hello", "\n\n", []
    )


def test_newlines_opening_the_answer_are_dropped_spaces_kept() -> None:
    assert hermes().parse("<think>r</think>\n\n") == ParsedOutput(None, "r", [])
    assert hermes().parse("<think>r</think>\n \nHi") == ParsedOutput(" \nHi", "r", [])
    assert hermes().parse("<think>r</think>\n\nA\n\nB") == ParsedOutput("A\n\nB", "r", [])


# --- streaming: held back only while a tag may be forming ------------------------------


def test_partial_tags_are_held_until_resolved() -> None:
    parser = hermes()
    assert parser.feed("<th") == []
    assert parser.feed("ink>plan</thi") == [ChatDelta(reasoning_content="plan")]
    assert parser.feed("nk>Hello <tool_") == [ChatDelta(content="Hello ")]
    assert parser.feed("cal") == []
    assert parser.feed("l? no") == [ChatDelta(content="<tool_call? no")]
    assert parser.finish() == []


def test_newlines_after_think_wait_for_the_answer_and_are_dropped() -> None:
    parser = hermes()
    assert parser.feed("<think>r</think>\n") == [ChatDelta(reasoning_content="r")]
    assert parser.feed("\n") == []
    assert parser.feed("Hi") == [ChatDelta(content="Hi")]
    assert parser.feed("\n") == [ChatDelta(content="\n")]  # mid-segment: no wait


def test_text_without_tags_streams_at_once() -> None:
    parser = make_parser(reasoning=False, tool_format=None)
    for chunk in ["Hello", " <tool_", "call>", " 🌍"]:
        assert parser.feed(chunk) == [ChatDelta(content=chunk)]
    assert parser.finish() == []


def test_tool_call_is_emitted_at_its_closing_tag() -> None:
    parser = hermes(reasoning=False)
    assert parser.feed('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_') == []
    (delta,) = parser.feed("call>")
    assert delta.tool_call == ToolCallDelta(0, '{"a": 1}', id="call_0000", name="f")
    assert parser.feed("\n") == []
    assert parser.finish() == []


# --- Qwen3-Coder -------------------------------------------------------------------------

CODER_TOOLS = one_tool(
    "edit",
    path={"type": "string"},
    line={"type": "integer"},
    scale={"type": "number"},
    dry_run={"type": "boolean"},
    opts={"type": "object"},
    tags={"type": "array"},
    limit={"type": ["integer", "null"]},
    mode={"anyOf": [{"type": "integer"}, {"type": "string"}]},
)


def coder_call(params: dict[str, str], name: str = "edit") -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def coder(text: str, tools: list[dict[str, Any]] | None = CODER_TOOLS) -> ParsedOutput:
    return make_parser(reasoning=True, tool_format="qwen3_coder", tools=tools).parse(text)


def test_coder_parameters_are_typed_by_schema() -> None:
    text = coder_call({
        "path": "src/ünï.py\n",  # the value's own newline survives: one per side is stripped
        "line": "42",
        "scale": "0.5",
        "dry_run": "False",
        "opts": '{"indent": 4}',
        "tags": '["a", "b"]',
        "limit": "null",
        "mode": "fast",
    })
    out = coder("I'll edit it.\n" + text)
    assert out.content == "I'll edit it.\n"
    assert json.loads(out.tool_calls[0].arguments) == {
        "path": "src/ünï.py\n", "line": 42, "scale": 0.5, "dry_run": False,
        "opts": {"indent": 4}, "tags": ["a", "b"], "limit": None, "mode": "fast",
    }


def test_coder_unparsable_values_stay_strings() -> None:
    text = coder_call({"line": "forty-two", "scale": "NaN", "opts": "{bad", "dry_run": "yes"})
    assert json.loads(coder(text).tool_calls[0].arguments) == {
        "line": "forty-two", "scale": "NaN", "opts": "{bad", "dry_run": "yes",
    }


def test_coder_unknown_tool_gets_strings() -> None:
    text = coder_call({"n": "5", "s": "x"}, name="other")
    assert coder(text, tools=None).tool_calls[0].arguments == '{"n": "5", "s": "x"}'


def test_coder_value_may_contain_the_closing_tag() -> None:
    value = 'echo "</tool_call>"\nexit 0'
    out = coder(coder_call({"path": value}))
    assert json.loads(out.tool_calls[0].arguments) == {"path": value}


@pytest.mark.parametrize(
    "text",
    [
        coder_call({"path": "a"}).replace("<parameter=path>\na\n</parameter>\n",
                                          "<parameter=path>\na\n</parameter>\n" * 2),
        "<tool_call>\n<function=edit>\nstray text\n</function>\n</tool_call>",
        "<tool_call>\n<function=edit>\n</tool_call>",
        '<tool_call>\n{"name": "edit", "arguments": {}}\n</tool_call>',
    ],
)
def test_coder_malformed_block_is_content(text: str) -> None:
    assert coder(text) == ParsedOutput(text, None, [])


def test_coder_cut_by_max_tokens_inside_a_value() -> None:
    text = "<tool_call>\n<function=edit>\n<parameter=path>\nsrc/ma"
    out = coder(text)
    assert out == ParsedOutput(text, None, [])
    assert out.finish_reason("length") == "length"


def test_coder_lenient_missing_parameter_close() -> None:
    text = (
        "<tool_call>\n<function=edit>\n<parameter=line>\n7\n"
        "<parameter=path>\np\n</function>\n</tool_call>"
    )
    assert json.loads(coder(text).tool_calls[0].arguments) == {"line": 7, "path": "p"}


# --- the data types ----------------------------------------------------------------------


def test_delta_shapes() -> None:
    assert ChatDelta(content="a").to_openai() == {"content": "a"}
    assert ChatDelta(reasoning_content="r").to_openai() == {"reasoning_content": "r"}
    later = ChatDelta(tool_call=ToolCallDelta(index=1, arguments='"}'))
    assert later.to_openai() == {"tool_calls": [{"index": 1, "function": {"arguments": '"}'}}]}
    assert ToolCall("call_1", "f", "{}").to_openai() == {
        "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"},
    }
    with pytest.raises(ValueError):
        ChatDelta(content="a", reasoning_content="b")
    with pytest.raises(ValueError):
        ChatDelta(content="")


def test_from_deltas_joins_argument_fragments() -> None:
    deltas = [
        ChatDelta(tool_call=ToolCallDelta(0, "", id="call_x", name="f")),
        ChatDelta(content="mid"),
        ChatDelta(tool_call=ToolCallDelta(0, '{"a": ')),
        ChatDelta(tool_call=ToolCallDelta(0, "1}")),
    ]
    assert parsed(deltas) == ParsedOutput("mid", None, [ToolCall("call_x", "f", '{"a": 1}')])


def test_default_ids_and_misuse() -> None:
    parser = output_parser("hermes", reasoning=False, tools=None)
    out = parser.parse('<tool_call>{"name": "f", "arguments": {}}</tool_call>')
    assert re.fullmatch(r"call_[0-9a-f]{24}", out.tool_calls[0].id)
    with pytest.raises(RuntimeError):
        parser.feed("more")
    with pytest.raises(ValueError):
        output_parser(None, reasoning=False, tools=None, starts_in_reasoning=True)
