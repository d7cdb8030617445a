"""Properties over arbitrary text and arbitrary chunkings.

1. Streaming is chunking-blind: any split of the text folds to exactly ``parse(text)``.
2. Nothing is lost: the deltas, written back as model text, keep every non-space character
   of the output outside the markup tags, in order.
3. Structured Qwen3 outputs built from known parts parse back to exactly those parts.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.generation import ToolFormat
from tests.protocol.output.helpers import (
    make_parser,
    one_tool,
    parsed,
    render,
    split_at,
    squash,
    stream,
)

CODER_TOOLS = one_tool("f", x={"type": "string"}, n={"type": "integer"})

FRAGMENTS = [
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<", "</", "<tool_", "</thi", "<th",
    "think>", "call>", ">", "\n", "\n\n", " ", "a", "Zé", "😀", '"', "\\", "{", "}", ",",
    '{"name": "f", "arguments": {"x": 1}}',
    '{"name": "g", "arguments": {"s": "</tool_call>", "q": "\\"<"}}',
    '{"name": "h", "arguments": {}}',
    "<function=f>", "</function>", "<parameter=x>", "</parameter>", "<parameter=n>", "<parameter=",
    "5", "true", "null", "[1, 2]", "NaN",
]

model_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)
tool_formats = st.sampled_from(["hermes", "qwen3_coder", None])
modes = st.sampled_from([(False, False), (True, False), (True, True)])


@settings(max_examples=400, deadline=None)
@given(model_text, cuts, tool_formats, modes)
def test_any_chunking_folds_to_parse(
    text: str, points: list[int], tool_format: ToolFormat | None, mode: tuple[bool, bool]
) -> None:
    reasoning, starts_in = mode

    def new() -> Any:
        return make_parser(
            reasoning=reasoning, tool_format=tool_format, tools=CODER_TOOLS,
            starts_in_reasoning=starts_in,
        )

    whole = new().parse(text)
    streamed = stream(new(), split_at(text, points))
    assert parsed(streamed) == whole
    indexes = [d.tool_call.index for d in streamed if d.tool_call is not None]
    assert indexes == list(range(len(indexes)))
    if not whole.tool_calls:
        assert whole.finish_reason("length") == "length"


@settings(max_examples=400, deadline=None)
@given(model_text, cuts, tool_formats, modes)
def test_no_output_is_lost(
    text: str, points: list[int], tool_format: ToolFormat | None, mode: tuple[bool, bool]
) -> None:
    reasoning, starts_in = mode
    parser = make_parser(
        reasoning=reasoning, tool_format=tool_format, tools=CODER_TOOLS,
        starts_in_reasoning=starts_in,
    )
    deltas = stream(parser, split_at(text, points))
    assert squash(render(deltas, tool_format)) == squash(text)


def test_no_output_is_lost_can_fail() -> None:
    """The squash comparison sees a dropped character (guards against a vacuous property)."""
    assert squash("<think>ab</think> c") != squash("<think>a</think> c")


# --- structured Qwen3 outputs ------------------------------------------------------------

TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
prose = st.text(st.sampled_from("ab é\n<>/\"\\{}😀中"), max_size=30).filter(
    lambda s: not any(tag in s for tag in TAGS)
)
words = prose.filter(lambda s: not s.isspace() and s != "")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.sampled_from('ab é"\\\n</tool_call>😀'), max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(prose, inner, max_size=3),
    max_leaves=8,
)
calls = st.lists(
    st.tuples(st.sampled_from(["get_weather", "read_file", "ĉu"]),
              st.dictionaries(prose, json_values, max_size=4)),
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(
    st.none() | prose, st.none() | words, calls, st.none() | words, st.booleans(),
    st.sampled_from([None, 2]), cuts,
)
def test_qwen3_hermes_output_parses_to_its_parts(
    thought: str | None,
    preamble: str | None,
    tool_calls: list[tuple[str, dict[str, Any]]],
    epilogue: str | None,
    ascii_json: bool,
    indent: int | None,
    points: list[int],
) -> None:
    text = f"<think>\n{thought}\n</think>\n\n" if thought is not None else ""
    text += preamble or ""
    for name, arguments in tool_calls:
        body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=ascii_json,
                          indent=indent)
        text += f"\n<tool_call>\n{body}\n</tool_call>"
    if tool_calls and epilogue:
        text += "\n" + epilogue

    lead = preamble or ""
    if thought is not None:
        lead = lead.lstrip("\n")  # the newlines that open the answer after </think>
    content = lead
    if tool_calls:
        content = lead + "\n" if lead and not lead.isspace() else ""
        content += "\n" + epilogue if epilogue else ""

    parser = make_parser(reasoning=True, tool_format="hermes")
    out = parsed(stream(parser, split_at(text, points)))
    assert out.reasoning_content == (f"\n{thought}\n" if thought is not None else None)
    assert out.content == (content or None)
    assert [(c.name, c.arguments) for c in out.tool_calls] == [
        (name, json.dumps(arguments, ensure_ascii=False)) for name, arguments in tool_calls
    ]
    assert out.finish_reason("stop") == ("tool_calls" if tool_calls else "stop")


# --- structured Qwen3-Coder outputs ------------------------------------------------------

CODER_PARAM_TAGS = ("<parameter=", "</parameter>", "</function>")
coder_strings = st.text(st.sampled_from("ab 5é\n<>/{}[]\"😀"), max_size=25).map(
    lambda s: s.replace("<>", "</tool_call>")  # the closing tag, inside a value
).filter(lambda s: not any(tag in s for tag in CODER_PARAM_TAGS))
typed_values: dict[str, st.SearchStrategy[Any]] = {
    "string": coder_strings,
    "integer": st.integers(),
    "number": st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
    "boolean": st.booleans(),
    "object": st.dictionaries(prose, json_values, max_size=3),
    "array": st.lists(json_values, max_size=3),
}
coder_params = st.dictionaries(
    st.sampled_from(["path", "count", "ratio", "flag", "options", "items", "ünï"]),
    st.sampled_from(sorted(typed_values)).flatmap(
        lambda kind: st.tuples(st.just(kind), typed_values[kind])
    ),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(coder_params, min_size=1, max_size=3), st.booleans(), cuts)
def test_qwen3_coder_output_parses_to_typed_arguments(
    call_params: list[dict[str, tuple[str, Any]]], known_tool: bool, points: list[int]
) -> None:
    text = "I'll run it."
    tools = []
    for i, params in enumerate(call_params):
        name = f"tool_{i}"
        properties = {p: {"type": kind} for p, (kind, _) in params.items()}
        tools.append({"type": "function", "function": {
            "name": name, "parameters": {"type": "object", "properties": properties}}})
        text += f"\n<tool_call>\n<function={name}>\n"
        for p, (_, value) in params.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            text += f"<parameter={p}>\n{shown}\n</parameter>\n"
        text += "</function>\n</tool_call>"

    parser = make_parser(reasoning=False, tool_format="qwen3_coder",
                         tools=tools if known_tool else None)
    out = parsed(stream(parser, split_at(text, points)))
    assert out.content == "I'll run it.\n"
    expected = []
    for params in call_params:
        arguments = {
            p: value if known_tool or isinstance(value, str)
            else json.dumps(value, ensure_ascii=False)
            for p, (_, value) in params.items()
        }
        expected.append(json.dumps(arguments, ensure_ascii=False))
    assert [c.arguments for c in out.tool_calls] == expected
    assert out.finish_reason("length") == "tool_calls"
