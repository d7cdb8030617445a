"""gpt-oss's harmony output: answers as the model writes them, streamed at every split.

Expected values follow the harmony format's documentation (channels ``analysis``,
``commentary``, ``final``; ``to=`` recipients; ``<|call|>`` / ``<|return|>`` ending a turn)
and what vLLM's gpt-oss parser makes of each message: analysis -> reasoning, a function
recipient -> a tool call, final and a recipient-less commentary -> content.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.protocol.output import ParsedOutput, ToolCall
from app.protocol.output.harmony import SPECIAL_TOKENS, HarmonyParser
from app.protocol.output.interface import ParserOptions
from app.protocol.output.marker_free import marker_free
from tests.protocol.output.helpers import (
    HARMONY_MARKERS,
    counting_ids,
    parsed,
    split_at,
    stream,
)


def harmony(*, reasoning: bool = True, tool_calls: bool = True) -> HarmonyParser:
    return HarmonyParser(
        ParserOptions(
            reasoning=reasoning,
            tools=None,
            tool_calls=tool_calls,
            starts_in_reasoning=False,
            id_factory=counting_ids(),
        )
    )


def every_split(text: str, **options: Any) -> ParsedOutput:
    """``parse(text)``, checked equal to the text streamed one character at a time and in
    two pieces split at every position."""
    whole = harmony(**options).parse(text)
    assert parsed(stream(harmony(**options), list(text))) == whole
    for cut in range(len(text) + 1):
        assert parsed(stream(harmony(**options), [text[:cut], text[cut:]])) == whole, cut
    return whole


WEATHER = (
    "<|channel|>analysis<|message|>The user asks for the weather in Paris. Use the tool."
    "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
    '<|constrain|>json<|message|>{"city": "Paris", "unit": "celsius"}<|call|>'
)


def test_analysis_then_a_tool_call() -> None:
    out = every_split(WEATHER)
    assert out == ParsedOutput(
        content=None,
        reasoning_content="The user asks for the weather in Paris. Use the tool.",
        tool_calls=[ToolCall("call_0000", "get_weather", '{"city": "Paris", "unit": "celsius"}')],
    )
    assert harmony().finish_reason("stop") == "stop"
    parser = harmony()
    parser.parse(WEATHER)
    assert parser.finish_reason("stop") == "tool_calls"


def test_the_servers_leave_the_stop_token_out() -> None:
    """vLLM and SGLang end the text before the ``<|call|>`` they stopped at: same call."""
    assert every_split(WEATHER.removesuffix("<|call|>")) == harmony().parse(WEATHER)


def test_analysis_then_the_final_answer() -> None:
    text = (
        "<|channel|>analysis<|message|>Simple greeting.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>"
    )
    assert every_split(text) == ParsedOutput("Hello! How can I help?", "Simple greeting.", [])
    assert every_split(text.removesuffix("<|return|>")) == harmony().parse(text)


def test_a_preamble_and_several_calls_recipient_before_or_after_the_channel() -> None:
    """The recipient may stand in the header before the channel (how the chat template
    renders calls back) or after it; a commentary without one is a preamble: content."""
    text = (
        "<|channel|>analysis<|message|>Two files to read.<|end|>"
        "<|start|>assistant<|channel|>commentary<|message|>Reading both files.<|end|>"
        "<|start|>assistant to=functions.read_file<|channel|>commentary json<|message|>"
        '{"path": "a.py"}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json"
        '<|message|>{"path": "b.py", "lines": {"from": 1, "to": [2, 3]}}<|call|>'
    )
    out = every_split(text)
    assert out.reasoning_content == "Two files to read."
    assert out.content == "Reading both files."
    assert out.tool_calls == [
        ToolCall("call_0000", "read_file", '{"path": "a.py"}'),
        ToolCall("call_0001", "read_file", '{"path": "b.py", "lines": {"from": 1, "to": [2, 3]}}'),
    ]


def test_markers_inside_the_arguments_strings_are_text() -> None:
    code = 'print("<|end|><|call|>")\n# <|start|>assistant<|channel|>final<|message|>'
    arguments = json.dumps({"path": "x.py", "content": code})
    text = (
        "<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>"
        + arguments
        + "<|call|>"
    )
    out = every_split(text)
    assert out.tool_calls == [ToolCall("call_0000", "write_file", arguments)]
    assert json.loads(out.tool_calls[0].arguments)["content"] == code
    assert out.content is None and out.reasoning_content is None
    assert every_split(text.removesuffix("<|call|>")) == out


def test_a_truncated_call_is_text_without_markers() -> None:
    text = (
        "<|channel|>analysis<|message|>Write it.<|end|><|start|>assistant<|channel|>"
        'commentary to=functions.write_file <|constrain|>json<|message|>{"path": "a", "con'
    )
    out = every_split(text)
    assert out == ParsedOutput('{"path": "a", "con', "Write it.", [])
    parser = harmony()
    parser.parse(text)
    assert parser.finish_reason("length") == "length"


@pytest.mark.parametrize("body", ["[1, 2]", '"x"', "{'a': 1}", '{"a": NaN}', '{"a": 1, "a": 2}'])
def test_a_call_whose_body_is_no_json_object_is_text(body: str) -> None:
    text = f"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{body}<|call|>"
    assert every_split(text) == ParsedOutput(body, None, [])


def test_an_unbalanced_quote_ends_the_call_at_the_first_marker() -> None:
    """The JSON never closes its string, so the scanner finds no end: at the end of the
    output the first literal end marker ends the body, and what follows is parsed again."""
    text = (
        '<|channel|>commentary to=functions.f<|message|>{"a": "b}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>Done."
    )
    assert every_split(text) == ParsedOutput('{"a": "b}Done.', None, [])


def test_an_empty_body_is_no_arguments() -> None:
    text = "<|channel|>commentary to=functions.list_files <|constrain|>json<|message|><|call|>"
    assert every_split(text).tool_calls == [ToolCall("call_0000", "list_files", "{}")]


def test_text_without_a_header_is_content_verbatim() -> None:
    assert every_split(" Hello,\nworld") == ParsedOutput(" Hello,\nworld", None, [])
    assert every_split("tomorrow") == ParsedOutput("tomorrow", None, [])


def test_lost_end_markers_still_split_messages() -> None:
    """llama.cpp renders ``<|start|>`` and ``<|channel|>`` always but ``<|end|>`` only when
    asked: the next header ends the message all the same."""
    for text in (
        "<|channel|>analysis<|message|>Hmm.<|start|>assistant<|channel|>final<|message|>Hi.",
        "<|channel|>analysis<|message|>Hmm.<|channel|>final<|message|>Hi.",
    ):
        assert every_split(text) == ParsedOutput("Hi.", "Hmm.", [])


def test_a_broken_header_is_content_without_its_markers() -> None:
    text = "<|channel|>final no message<|end|><|start|>assistant<|channel|>final<|message|>ok"
    assert every_split(text) == ParsedOutput("final no messageok", None, [])
    assert every_split("<|channel|>final") == ParsedOutput("final", None, [])


def test_stray_markers_in_a_body_are_dropped() -> None:
    text = "<|channel|>final<|message|>a<|message|>b<|constrain|>c<|endoftext|>"
    assert every_split(text) == ParsedOutput("abc", None, [])


def test_without_tools_a_call_is_content() -> None:
    out = every_split(WEATHER, tool_calls=False)
    assert out.tool_calls == [] and out.content == '{"city": "Paris", "unit": "celsius"}'


def test_without_reasoning_the_analysis_is_content() -> None:
    text = "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y"
    assert every_split(text, reasoning=False) == ParsedOutput("xy", None, [])


def test_streamed_deltas_in_order() -> None:
    text = (
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary"
        "<|message|>On it.<|end|><|start|>assistant to=functions.a<|channel|>commentary json"
        '<|message|>{"x": 1}<|call|>'
    )
    deltas = stream(harmony(), [text[i : i + 3] for i in range(0, len(text), 3)])
    kinds = [next(k for k, v in d.to_openai().items() if v) for d in deltas]
    assert kinds[0] == "reasoning_content" and kinds[-1] == "tool_calls"
    assert "content" in kinds and kinds.index("content") < kinds.index("tool_calls")
    assert deltas[-1].to_openai() == {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_0000",
                "type": "function",
                "function": {"name": "a", "arguments": '{"x": 1}'},
            }
        ]
    }


def test_parse_and_feed_refuse_misuse() -> None:
    parser = harmony()
    parser.finish()
    with pytest.raises(RuntimeError):
        parser.feed("x")
    with pytest.raises(RuntimeError):
        parser.finish()


# --- properties over arbitrary text --------------------------------------------------------

FRAGMENTS = [
    *HARMONY_MARKERS,
    "<|",
    "|>",
    "<|ch",
    "nnel|>",
    "<|en",
    "d|>",
    "<|e",
    "assistant",
    "analysis",
    "commentary",
    "final",
    " to=functions.f",
    "to=functions.g",
    " to=assistant",
    " json",
    "json",
    "<",
    "a",
    " ",
    "\n",
    "é😀",
    '"',
    "\\",
    "{",
    "}",
    ":",
    ",",
    '{"x": 1}',
    '{"s": "<|call|>"}',
    "[1]",
]
harmony_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


@settings(max_examples=500)
@given(harmony_text, cuts, st.booleans(), st.booleans())
def test_any_chunking_folds_to_parse(
    text: str, points: list[int], reasoning: bool, tool_calls: bool
) -> None:
    options = {"reasoning": reasoning, "tool_calls": tool_calls}
    whole = harmony(**options).parse(text)
    streamed = stream(harmony(**options), split_at(text, points))
    assert parsed(streamed) == whole
    assert [d.tool_call.index for d in streamed if d.tool_call] == list(
        range(len(whole.tool_calls))
    )
    # What the client reads: the parser leaves no marker of the model's; one that two pieces
    # of text make when a marker between them is taken out goes at the boundary.
    shown = marker_free(harmony(**options), SPECIAL_TOKENS).parse(text)
    assert shown.tool_calls == whole.tool_calls
    for value in (shown.content or "", shown.reasoning_content or ""):
        assert not any(marker in value for marker in HARMONY_MARKERS), (text, value)
    for call in whole.tool_calls:
        assert isinstance(json.loads(call.arguments), dict)
