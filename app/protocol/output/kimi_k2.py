"""Kimi K2 tool calls: a section of special-token markers, each call named by its native id.

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

The header is ``functions.<name>:<n>``, ``n`` counting the calls of the conversation (Kimi's
chat templates rebuild it from the name and their own counter, so the id the client gets back
need not be it). Every marker is a special token: the upstream must keep special tokens in
its output text. Reasoning is ``<think>``...``</think>``; a section that opens before
``</think>`` ends the reasoning (as vLLM reads Kimi K2).
"""

from __future__ import annotations

import re

from app.protocol.output.interface import Call, Format, Schemas, TagCalls
from app.protocol.output.marker_sections import SectionEnd, SectionMarkers, decode_section

MARKERS = SectionMarkers(
    begin="<|tool_calls_section_begin|>",
    end="<|tool_calls_section_end|>",
    call_begin="<|tool_call_begin|>",
    args_begin="<|tool_call_argument_begin|>",
    call_end="<|tool_call_end|>",
)

_HEADER = re.compile(r"(?:functions\.)?([^\s:]+):\d+")


def name_of_header(header: str) -> str | None:
    """``get_weather`` from ``functions.get_weather:0``; ``None`` for any other header."""
    match = _HEADER.fullmatch(header.strip())
    return match.group(1) if match else None


def kimi_k2_section_end() -> SectionEnd:
    return SectionEnd(MARKERS)


def decode_kimi_k2(body: str, schemas: Schemas) -> list[Call] | None:
    """The calls of one section (the text between its begin and end markers); the JSON
    carries its own types, ``schemas`` is not needed."""
    return decode_section(body, MARKERS, name_of_header)


FORMAT = Format(
    name="kimi_k2",
    template_markers=(MARKERS.begin, MARKERS.args_begin),
    calls=TagCalls(
        opens=(MARKERS.begin,),
        close=MARKERS.end,
        block_end=kimi_k2_section_end,
        decode=decode_kimi_k2,
        end_reasoning=True,
    ),
    special_tokens=(*MARKERS.all, "<think>", "</think>"),
)
