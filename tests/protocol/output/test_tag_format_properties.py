"""Properties of the GLM, MiniMax M2, Seed-OSS, DSML and Gemma 4 parsers over arbitrary text
made of their markers, values and prose, and arbitrary chunkings.

1. Streaming is chunking-blind: any split of the text folds to exactly ``parse(text)``.
2. Nothing is lost: the deltas, written back (a call as its name, keys and values), keep every
   letter of the output outside the markers, in order.
3. Nothing raises, whatever the text.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.generation import ToolFormat
from app.protocol.output import ChatDelta
from tests.protocol.output.helpers import make_parser, one_tool, parsed, split_at, stream

D = "｜DSML｜"
Q = '<|"|>'
PROSE = ["\n", " ", "a", "Zé", "😀", "<", ">", "/", '"', "=", "{", "}", ",", ":", "1", "true"]
TOOLS = one_tool("f", x={"type": "string"}, n={"type": "integer"})

FRAGMENTS: dict[ToolFormat, list[str]] = {
    "glm45": [
        "<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
        "<arg_value>", "</arg_value>", "<tool_", "</arg", "f\n", "x", "n",
        "<tool_call>f\n<arg_key>x</arg_key>\n<arg_value>va</tool_call>l</arg_value>\n</tool_call>",
        "<tool_call>f\n<arg_key>n</arg_key>\n<arg_value>5</arg_value>\n</tool_call>",
    ],
    "glm47": [
        "<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
        "<arg_value>", "</arg_value>", "<arg_", "f", "x",
        "<tool_call>f<arg_key>x</arg_key><arg_value>v</arg_value></tool_call>",
        "<tool_call>g</tool_call>",
    ],
    "minimax_m2": [
        "<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>", '<invoke name="f">',
        "</invoke>", '<parameter name="x">', '<parameter name="n">', "</parameter>", "<minimax:",
        '<minimax:tool_call><invoke name="f"><parameter name="x">v</minimax:tool_call>'
        "</parameter></invoke></minimax:tool_call>",
        '<minimax:tool_call>\n<invoke name="g">\n</invoke>\n</minimax:tool_call>',
        '<invoke name="f"><parameter name="n">5</parameter></invoke>',
    ],
    "seed_oss": [
        "<seed:think>", "</seed:think>", "<seed:tool_call>", "</seed:tool_call>", "<function=f>",
        "</function>", "<parameter=x>", "<parameter=n>", "</parameter>", "<seed:", "\n",
        "<seed:tool_call>\n<function=f>\n<parameter=n>3</parameter>\n</function>\n"
        "</seed:tool_call>",
    ],
    "deepseek_v32": [
        "<think>", "</think>", f"<{D}function_calls>", f"</{D}function_calls>",
        f"<{D}tool_calls>", f"</{D}tool_calls>", f'<{D}invoke name="f">', f"</{D}invoke>",
        f'<{D}parameter name="x" string="true">', f'<{D}parameter name="n" string="false">',
        f"</{D}parameter>", f"<{D}", "｜",
        f'<{D}function_calls>\n<{D}invoke name="f">\n<{D}parameter name="x" string="true">'
        f"v</{D}function_calls></{D}parameter>\n</{D}invoke>\n</{D}function_calls>",
        f'<{D}invoke name="f"><{D}parameter name="n" string="false">5</{D}parameter></{D}invoke>',
    ],
    "gemma4": [
        "<|channel>thought", "<channel|>", "<|tool_call>", "<tool_call|>", Q, "call:f{", "call:",
        "x:", "n:", "[", "]", "<|", "|>",
        f"<|tool_call>call:f{{x:{Q}a<tool_call|>b{Q},n:[1,{{k:true}}]}}<tool_call|>",
    ],
}  # fmt: skip
MARKERS: dict[ToolFormat, tuple[str, ...]] = {
    "glm45": ("<think>", "</think>", "tool_call", "arg_key", "arg_value"),
    "glm47": ("<think>", "</think>", "tool_call", "arg_key", "arg_value"),
    "minimax_m2": ("<think>", "</think>", "minimax", "tool_call", "invoke", "parameter", "name"),
    "seed_oss": ("seed", "think", "tool_call", "function", "parameter"),
    "deepseek_v32": ("<think>", "</think>", "DSML", "function_calls", "tool_calls", "invoke",
                     "parameter", "name", "string", "true", "false"),
    "gemma4": ("channel", "thought", "tool_call", "call"),
}  # fmt: skip
"""What a parsed call does not give back: markers, and the envelope's own words."""

cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


def model_text(fmt: ToolFormat) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(FRAGMENTS[fmt] + PROSE), max_size=30).map("".join)


def flat(value: Any) -> str:
    """A JSON value's text as the model wrote it: strings raw, keys before their values."""
    if isinstance(value, dict):
        return "".join(key + flat(item) for key, item in value.items())
    if isinstance(value, list):
        return "".join(map(flat, value))
    return value if isinstance(value, str) else json.dumps(value)


def written_back(deltas: list[ChatDelta]) -> str:
    parts: list[str] = []
    for delta in deltas:
        if delta.tool_call is not None:
            arguments = json.loads(delta.tool_call.arguments)
            parts.append((delta.tool_call.name or "") + flat(arguments))
        else:
            parts.append(delta.content or delta.reasoning_content or "")
    return "".join(parts)


def letters(fmt: ToolFormat, text: str) -> str:
    for marker in sorted(MARKERS[fmt], key=len, reverse=True):
        text = text.replace(marker, " ")
    return re.sub(r"[\W\d_]", "", text)


@pytest.mark.parametrize("fmt", list(FRAGMENTS))
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_any_chunking_folds_to_parse(fmt: ToolFormat, data: st.DataObject) -> None:
    text = data.draw(model_text(fmt))
    points = data.draw(cuts)
    reasoning, starts_in = data.draw(st.sampled_from([(False, False), (True, False), (True, True)]))

    def new() -> Any:
        return make_parser(
            reasoning=reasoning, tool_format=fmt, tools=TOOLS, starts_in_reasoning=starts_in
        )

    whole = new().parse(text)
    streamed = stream(new(), split_at(text, points))
    assert parsed(streamed) == whole
    indexes = [d.tool_call.index for d in streamed if d.tool_call is not None]
    assert indexes == list(range(len(indexes)))


@pytest.mark.parametrize("fmt", list(FRAGMENTS))
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_no_output_is_lost(fmt: ToolFormat, data: st.DataObject) -> None:
    text = data.draw(model_text(fmt))
    parser = make_parser(reasoning=data.draw(st.booleans()), tool_format=fmt, tools=TOOLS)
    deltas = stream(parser, split_at(text, data.draw(cuts)))
    assert letters(fmt, written_back(deltas)) == letters(fmt, text)


def test_no_output_is_lost_can_fail() -> None:
    """The comparison sees a dropped letter (guards against a vacuous property)."""
    assert letters("glm47", "<think>ab</think> c") != letters("glm47", "<think>a</think> c")


CALL_IN_REASONING: dict[ToolFormat, str] = {
    "glm45": "<tool_call>f\n<arg_key>n</arg_key>\n<arg_value>5</arg_value>\n</tool_call>",
    "glm47": "<tool_call>f<arg_key>n</arg_key><arg_value>5</arg_value></tool_call>",
    "minimax_m2": '<minimax:tool_call><invoke name="f"><parameter name="n">5</parameter>'
    "</invoke></minimax:tool_call>",
    "seed_oss": "<seed:tool_call><function=f><parameter=n>5</parameter></function>"
    "</seed:tool_call>",
    "deepseek_v32": f'<{D}tool_calls><{D}invoke name="f"><{D}parameter name="n" string="false">5'
    f"</{D}parameter></{D}invoke></{D}tool_calls>",
    "gemma4": "<|tool_call>call:f{n:5}<tool_call|>",
}


@pytest.mark.parametrize("fmt", list(CALL_IN_REASONING))
def test_a_call_before_the_reasoning_closes_ends_it(fmt: ToolFormat) -> None:
    """The model went on to a call without closing its reasoning (the prompt opened it): the
    call is a call, as vLLM reads these formats, in every split."""
    text = "Plan: call f.\n" + CALL_IN_REASONING[fmt] + "\nDone."

    def new() -> Any:
        return make_parser(reasoning=True, tool_format=fmt, tools=TOOLS, starts_in_reasoning=True)

    out = new().parse(text)
    assert (out.reasoning_content, out.content) == ("Plan: call f.\n", "\nDone.")
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("f", '{"n": 5}')]
    for cut in range(1, len(text)):
        assert parsed(stream(new(), [text[:cut], text[cut:]])) == out, cut


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder"])
def test_qwen3_calls_inside_reasoning_stay_reasoning(fmt: ToolFormat) -> None:
    text = "<think>Maybe <tool_call>"
    assert make_parser(reasoning=True, tool_format=fmt).parse(text).reasoning_content == text[7:]
