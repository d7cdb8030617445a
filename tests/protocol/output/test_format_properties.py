"""Properties of the Kimi K2, DeepSeek V3.1, Mistral, Llama 3 JSON and pythonic parsers over
arbitrary text made of their markers, JSON and Python pieces, and arbitrary chunkings.

1. Streaming is chunking-blind: any split of the text folds to exactly ``parse(text)``.
2. Nothing is lost: the deltas, written back as model text, keep every character of the
   output that is not whitespace or a marker, in order.
3. Nothing raises, whatever the text.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.generation import ToolFormat
from app.protocol.output import FORMATS, ChatDelta
from tests.protocol.output.helpers import make_parser, parsed, split_at, stream

JSON_PIECES = ['{"a": 1}', '{"s": "x\\"y"}', "{", "}", "[", "]", '"', "\\", ",", ";", ":", "1"]
PROSE = ["\n", " ", "\n\n", "a", "Zé", "😀", "<", "|", "｜"]

KIMI_K2 = (
    "<think>",
    "</think>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_end|>",
    "<|tool_call_argument_begin|>",
)
DEEPSEEK_V31 = (
    "<think>",
    "</think>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
)
MISTRAL = (
    "[THINK]",
    "[/THINK]",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "a1B2c3D4e",
)
"""Each format's markers (Mistral's with a call id), spelled out here."""

FRAGMENTS: dict[ToolFormat, list[str]] = {
    "kimi_k2": [
        *KIMI_K2,
        "functions.f:0",
        "functions.get_weather:12",
        "<|tool_",
        "<|tool_call",
        '{"code": "<|tool_call_end|><|tool_calls_section_end|>"}',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        '{"x": "<|tool_calls_section_end|>"}<|tool_call_end|><|tool_calls_section_end|>',
        '<|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{"y": 2}<|tool_call_end|>',
    ],
    "deepseek_v31": [
        *DEEPSEEK_V31,
        "get_weather",
        "f",
        "<｜tool▁",
        '{"code": "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"}',
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"x": [1]}<｜tool▁call▁end｜>'
        "<｜tool▁calls▁end｜>",
        '<｜tool▁call▁begin｜>g<｜tool▁sep｜>{"y": 2}<｜tool▁call▁end｜>',
    ],
    "mistral": [
        *MISTRAL,
        "[TOOL_",
        "[AR",
        "get_weather",
        "f",
        '[{"name": "f", "arguments": {"x": [1]}}]',
        '{"code": "[TOOL_CALLS]g[ARGS]{}"}',
        '[TOOL_CALLS]f[ARGS]{"x": "[TOOL_CALLS]"}',
    ],
    "llama3_json": [
        "<|python_tag|>",
        "<|python",
        '{"name": "f", "parameters": {"x": [1]}}',
        '{"name": "g", "arguments": {"s": "};{"}}',
        '{"type": "function", "name": "h", "parameters": {}}',
        '{"name": 1}',
        "; ",
    ],
    "pythonic": [
        "<|python_start|>",
        "<|python_end|>",
        "<|python",
        "[f(x=1)",
        "[f(x=1)]",
        "[get_weather(city='Pa]ris', days=[1, -2]), g()]",
        "(",
        ")",
        "'",
        "'''",
        "#",
        "=",
        "f(",
        "x=",
        "None",
        "true",
    ],
}
MARKERS: dict[ToolFormat, tuple[str, ...]] = {
    "kimi_k2": (*KIMI_K2, "functions"),
    "deepseek_v31": DEEPSEEK_V31,
    "mistral": (*MISTRAL, "name", "arguments"),
    "llama3_json": ("<|python_tag|>", "name", "parameters", "arguments", "type", "function"),
    "pythonic": ("<|python_start|>", "<|python_end|>"),
}
"""What a parsed call does not give back: markers, and the envelope's own words."""
NAMES = list(FRAGMENTS)

cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


def model_text(fmt: ToolFormat) -> st.SearchStrategy[str]:
    """Any soup of the pieces, half the time opening with a whole call (a bare call only
    counts there)."""
    soup = st.lists(st.sampled_from(FRAGMENTS[fmt] + JSON_PIECES + PROSE), max_size=30).map("".join)
    calls = [piece for piece in FRAGMENTS[fmt] if len(piece) > 12]
    opening = st.tuples(st.sampled_from(["", " ", "\n"]), st.sampled_from(calls), soup)
    return soup | opening.map("".join)


def modes(fmt: ToolFormat) -> st.SearchStrategy[tuple[bool, bool]]:
    """``(reasoning, starts_in_reasoning)``: the prompt may open reasoning where the family
    writes any."""
    if FORMATS[fmt].reasoning is None:
        return st.sampled_from([(False, False), (True, False)])
    return st.sampled_from([(False, False), (True, False), (True, True)])


def written_back(deltas: list[ChatDelta]) -> str:
    """The text of every delta: content, reasoning, and each call's name and arguments."""
    parts: list[str] = []
    for delta in deltas:
        if delta.tool_call is not None:
            parts.append((delta.tool_call.name or "") + delta.tool_call.arguments)
        else:
            parts.append(delta.content or delta.reasoning_content or "")
    return "".join(parts)


def letters(fmt: ToolFormat, text: str) -> str:
    """The letters of ``text`` outside markers, in order: what a call's JSON or Python
    rewriting (quotes, spacing, ``None`` as ``null``, the header's index) cannot change."""
    for marker in sorted(MARKERS[fmt], key=len, reverse=True):
        text = text.replace(marker, " ")
    return re.sub(r"[\W\d_]", "", text.lower().replace("none", "null"))


@pytest.mark.parametrize("fmt", NAMES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_chunking_folds_to_parse(fmt: ToolFormat, data: st.DataObject) -> None:
    text = data.draw(model_text(fmt))
    points = data.draw(cuts)
    reasoning, starts_in = data.draw(modes(fmt))

    def new() -> Any:
        return make_parser(reasoning=reasoning, tool_format=fmt, starts_in_reasoning=starts_in)

    whole = new().parse(text)
    streamed = stream(new(), split_at(text, points))
    assert parsed(streamed) == whole
    indexes = [d.tool_call.index for d in streamed if d.tool_call is not None]
    assert indexes == list(range(len(indexes)))


@pytest.mark.parametrize("fmt", NAMES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_no_output_is_lost(fmt: ToolFormat, data: st.DataObject) -> None:
    text = data.draw(model_text(fmt))
    reasoning, starts_in = data.draw(modes(fmt))
    parser = make_parser(reasoning=reasoning, tool_format=fmt, starts_in_reasoning=starts_in)
    deltas = stream(parser, split_at(text, data.draw(cuts)))
    assert letters(fmt, written_back(deltas)) == letters(fmt, text)


def test_no_output_is_lost_can_fail() -> None:
    """The comparison sees a dropped letter (guards against a vacuous property)."""
    assert letters("kimi_k2", "<think>ab</think> c") != letters("kimi_k2", "<think>a</think> c")


DEEP = "[" * 50_000 + "]" * 50_000
DEEPLY_NESTED: list[tuple[ToolFormat, str]] = [
    (
        "kimi_k2",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        f'{{"x": {DEEP}}}<|tool_call_end|><|tool_calls_section_end|>',
    ),
    (
        "deepseek_v31",
        f'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{{"x": {DEEP}}}'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    ),
    ("mistral", f'[TOOL_CALLS]f[ARGS]{{"x": {DEEP}}}'),
    ("llama3_json", f'{{"name": "f", "parameters": {{"x": {DEEP}}}}}'),
    ("pythonic", f"[f(x={DEEP})]"),  # the parser refuses the nesting
    ("pythonic", f"[f(x={'-' * 50_000}1)]"),  # runs out of memory
    ("pythonic", f"[f(x={'1+' * 100_000}1)]"),  # runs out of stack
]


@pytest.mark.parametrize(("fmt", "text"), DEEPLY_NESTED)
def test_arguments_nested_too_deeply_are_text_not_an_error(fmt: ToolFormat, text: str) -> None:
    assert make_parser(reasoning=False, tool_format=fmt).parse(text) == parsed(
        [ChatDelta(content=text)]
    )
