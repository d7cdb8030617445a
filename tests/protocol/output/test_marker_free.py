"""No special-token marker reaches a client: every format whose markers are special tokens,
over arbitrary text made of its markers (malformed calls among them), split anywhere, all its
markers taken for control tokens (the service takes those its vocabulary marks special)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.generation import ToolFormat
from app.protocol.output import FORMATS, ParsedOutput
from app.protocol.output.marker_free import marker_free
from tests.protocol.output.helpers import make_parser, parsed, split_at, stream

SPECIAL: list[ToolFormat] = [name for name, fmt in FORMATS.items() if fmt.special_tokens]
PIECES = ["a", " ", "\n", "Zé😀", "<", "|", ">", "{", "}", '"', ":", "0", "f", "functions.f:0",
          '{"x": 1}', "get_weather", "=", "name="]  # fmt: skip


def pieces(tool_format: ToolFormat) -> list[str]:
    markers = FORMATS[tool_format].special_tokens
    return [*markers, *(m[: len(m) // 2] for m in markers), *(m[len(m) // 2 :] for m in markers),
            *PIECES]  # fmt: skip


def wrapped(tool_format: ToolFormat, **options: Any) -> Any:
    parser = make_parser(tool_format=tool_format, reasoning=True, tools=None, **options)
    return marker_free(parser, FORMATS[tool_format].special_tokens)


def strip(text: str, markers: tuple[str, ...]) -> str:
    pattern = re.compile("|".join(map(re.escape, markers)))
    while (shorter := pattern.sub("", text)) != text:
        text = shorter
    return text


def test_every_format_written_in_special_tokens_is_covered() -> None:
    assert {"harmony", "kimi_k2", "deepseek_v31", "mistral", "gemma4", "glm45"} <= set(SPECIAL)
    parser = make_parser(tool_format="hermes", reasoning=True)
    assert marker_free(parser, ()) is parser


@pytest.mark.parametrize("tool_format", SPECIAL)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_no_marker_reaches_the_client(tool_format: ToolFormat, data: st.DataObject) -> None:
    markers = FORMATS[tool_format].special_tokens
    text = "".join(data.draw(st.lists(st.sampled_from(pieces(tool_format)), max_size=30)))
    points = data.draw(st.lists(st.integers(0, 10_000), max_size=8))
    whole = wrapped(tool_format).parse(text)
    assert parsed(stream(wrapped(tool_format), split_at(text, points))) == whole
    for value in (whole.content or "", whole.reasoning_content or ""):
        assert not any(marker in value for marker in markers), (text, value)
    plain = make_parser(tool_format=tool_format, reasoning=True).parse(text)
    assert whole.tool_calls == plain.tool_calls  # the arguments pass as written
    if not plain.tool_calls and plain.reasoning_content is None:
        assert (whole.content or "") == strip(plain.content or "", markers)


def test_a_malformed_kimi_section_is_its_text_without_the_markers() -> None:
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        "<|tool_call_argument_begin|>{city: Paris}<|tool_call_end|><|tool_calls_section_end|>"
    )
    out = wrapped("kimi_k2").parse(text)
    assert out == ParsedOutput("functions.get_weather:0{city: Paris}", None, [])


def test_a_marker_split_across_pieces_is_taken_out_whole() -> None:
    text = "Done.<|tool_calls_section_end|> Bye."
    for cut in range(len(text) + 1):
        chunks = [text[:cut], text[cut:]]
        assert parsed(stream(wrapped("kimi_k2"), chunks)).content == "Done. Bye."
